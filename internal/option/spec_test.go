package option

import (
	"bytes"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

// opts has an option of every kind, as a library declares them.
type opts struct {
	Count   int
	Threads int
	Rate    float64
	Wait    time.Duration
	Seed    uint64
	Cache   int64
	Name    string
	On      bool
	From    []string
	Mode    upper
}

// upper is a Var: an upper-case word.
type upper struct{ s *string }

func (u upper) String() string {
	if u.s == nil {
		return ""
	}
	return *u.s
}
func (u upper) Set(s string) error { *u.s = strings.ToUpper(s); return nil }

func (o *opts) Specs() Specs {
	if o.Mode.s == nil {
		o.Mode.s = new(string)
	}
	return Specs{
		Num(&o.Count, "Count", "count", 8, Above(0), "how many"),
		Num(&o.Threads, "Threads", "threads", 0, From(0), "threads (0 = all cores)"),
		Num(&o.Rate, "Rate", "rate", 2.5, Above(0), "per second"),
		Num(&o.Wait, "Wait", "wait", time.Second, Above(0), "how long"),
		Num(&o.Seed, "Seed", "seed", 1, Any, "seed"),
		MiB(&o.Cache, "Cache", "cache-mb", 256<<20, From(0), "cache in `MiB`"),
		String(&o.Name, "Name", "name", "x", "a name"),
		Bool(&o.On, "On", "on", true, "a switch"),
		List(&o.From, "From", "from", "hosts"),
		Var(o.Mode, "Mode", "mode", "auto", "a mode"),
	}
}

func TestDefaultsAndCheck(t *testing.T) {
	o := Defaults[opts]()
	if o.Count != 8 || o.Threads != 0 || o.Rate != 2.5 || o.Wait != time.Second || o.Seed != 1 || o.Cache != 256<<20 ||
		o.Name != "x" || !o.On || o.From != nil || *o.Mode.s != "AUTO" {
		t.Fatalf("defaults: %+v", o)
	}
	if err := o.Specs().Check(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	o.Count, o.Threads, o.Rate, o.Wait, o.Cache = 0, -1, -0.5, 0, -1<<20
	err := o.Specs().Check()
	want := "Count: 0, want > 0\nThreads: -1, want >= 0\nRate: -0.5, want > 0\nWait: 0s, want > 0\nCache: -1, want >= 0"
	if err == nil || err.Error() != want {
		t.Errorf("Check: %v, want\n%s", err, want)
	}
}

// The flags a FlagSet gets from the table set the fields, start at their defaults, and --help
// shows every flag with its default; Args gives back the flags of what differs from the defaults.
func TestRegisterAndArgs(t *testing.T) {
	var o opts
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.Specs().Register(fs)
	if o.Count != 8 || o.Cache != 256<<20 || !o.On || *o.Mode.s != "AUTO" {
		t.Errorf("Register left %+v, want the defaults", o)
	}
	args := []string{"--count=3", "--wait=2ms", "--cache-mb=3", "--on=false", "--from=a:1,b:2", "--mode=require"}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if o.Count != 3 || o.Wait != 2*time.Millisecond || o.Cache != 3<<20 || o.On || !slices.Equal(o.From, []string{"a:1", "b:2"}) || *o.Mode.s != "REQUIRE" {
		t.Errorf("parsed %+v", o)
	}
	if got, want := o.Specs().Args(), []string{"--count=3", "--wait=2ms", "--cache-mb=3", "--on=false", "--from=a:1,b:2", "--mode=REQUIRE"}; !slices.Equal(got, want) {
		t.Errorf("Args: %q, want %q", got, want)
	}
	var help bytes.Buffer
	fs.SetOutput(&help)
	fs.PrintDefaults()
	for _, s := range []string{"-count int", "(default 8)", "-rate float", "(default 2.5)", "-wait duration", "(default 1s)",
		"-cache-mb MiB", "(default 256)", "-name string", `(default "x")`, "-on", "(default true)", "-from value", "-mode value", "(default AUTO)"} {
		if !strings.Contains(help.String(), s) {
			t.Errorf("--help lacks %q:\n%s", s, help.String())
		}
	}
}

func TestUnderAndFlags(t *testing.T) {
	var o opts
	m := o.Specs().Under("Inner.").Flags()
	if m["Inner.Count"] != "--count" || m["Inner.Cache"] != "--cache-mb" || len(m) != 10 {
		t.Errorf("Flags of Under: %v", m)
	}
	if err := o.Specs().Under("Inner.").Check(); err == nil || !strings.HasPrefix(err.Error(), "Inner.Count: 0, want > 0") {
		t.Errorf("Check of Under: %v", err)
	}
}
