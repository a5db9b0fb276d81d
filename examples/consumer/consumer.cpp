// consumer.cpp — C++ use of the installed runtime (runtime.hpp): buffers, a stream, a host callable.
#include <runtime/runtime.hpp>

#include <cstdio>
#include <numeric>
#include <vector>

int main() {
    try {
        std::vector<float> in(1 << 16), out(in.size(), 0.0f);
        std::iota(in.begin(), in.end(), 1.0f);
        runtime::DeviceBuffer<float> dev(in.size());
        runtime::Stream stream;
        bool ran = false;
        dev.copy_from_host(in, stream);
        stream.launch_host_func([&ran] { ran = true; });
        dev.copy_to_host(out, stream);
        stream.synchronize();
        if (!ran || out != in) {
            std::fprintf(stderr, "app: wrong result\n");
            return 1;
        }
        std::printf("app: OK (%d device(s), device 0 = %s)\n", runtime::device_count(),
                    runtime::device_properties(0).name.c_str());
        return 0;
    } catch (const runtime::Error& e) {
        std::fprintf(stderr, "app: %s\n", e.what());
        return 1;
    }
}
