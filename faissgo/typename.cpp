// The shim's C++ half: what the FAISS C API does not offer. It has no type introspection (and
// no cast for HNSW or PQ indexes), so the class name comes from C++ RTTI. No exception can escape: typeid of a non-null
// polymorphic object does not throw, and the demangler reports failure by status.
#include <cxxabi.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <typeinfo>

#include <faiss/Index.h>
#include <faiss/IndexFlat.h>
#include <faiss/utils/utils.h>

#include "shim.h"

extern "C" void needle_index_type_name(const FaissIndex* idx, char* out, size_t outlen) {
    const faiss::Index* index = reinterpret_cast<const faiss::Index*>(idx);
    const char* mangled = typeid(*index).name();
    int status = 0;
    char* name = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
    const char* shown = status == 0 && name ? name : mangled;
    if (std::strncmp(shown, "faiss::", 7) == 0) {
        shown += 7;
    }
    std::snprintf(out, outlen, "%s", shown);
    std::free(name);
}

extern "C" int needle_index_is_flat(const FaissIndex* idx) {
    return dynamic_cast<const faiss::IndexFlat*>(reinterpret_cast<const faiss::Index*>(idx)) != nullptr;
}

extern "C" void needle_faiss_compile_options(char* out, size_t outlen) {
    std::snprintf(out, outlen, "%s", faiss::get_compile_options().c_str());
}
