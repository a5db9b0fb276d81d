// runtime._core's profiler functions (profiler.h): rtProfilerStart/Stop for python/runtime/profile.py.
// A failure raises the exception class registered for its rtError_t (core_module.cpp's check, handed in).
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <runtime/profiler.h>

#include <string>

namespace nb = nanobind;

void bind_profiler(nb::module_& m, void (*check)(rtError_t, const char*)) {
    m.attr("PROFILER_DEFAULT") = RT_PROFILER_DEFAULT;
    m.attr("PROFILER_NO_API_CALLS") = RT_PROFILER_NO_API_CALLS;
    m.attr("PROFILER_NO_MEMORY") = RT_PROFILER_NO_MEMORY;
    m.def("profiler_start", [check](const std::string& path, unsigned flags) {
        rtError_t e;
        {
            nb::gil_scoped_release r;
            e = rtProfilerStart(path.c_str(), flags);
        }
        check(e, "rtProfilerStart");
    }, nb::arg("path"), nb::arg("flags") = RT_PROFILER_DEFAULT, "rtProfilerStart: writes a trace to `path`.");
    m.def("profiler_stop", [check]() {
        rtError_t e;
        {
            nb::gil_scoped_release r;  // waits for the writer thread to finish the file
            e = rtProfilerStop();
        }
        check(e, "rtProfilerStop");
    }, "rtProfilerStop: completes and closes the trace file.");
}
