"""needle as a wheel: the `needle` binary (bin/needle, run by the `needle` command) and the
needle_trainer package, with the libraries they load bundled beside them (needle_rl.libs)."""
import os

BINARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "needle")
