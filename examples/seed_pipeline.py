"""The main job in Python: the seed's pipeline (H2D -> @runtime.jit kernel -> D2H) on the default device with two
streams and one event, verified, printing results and timings. Usage: python examples/seed_pipeline.py [n_floats]"""
import sys
import time

import numpy as np

import runtime


@runtime.jit
def my_kernel(input_data, output_data, size):
    idx = runtime.get_global_id()
    if idx < size:
        output_data[idx] = input_data[idx] * 2


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16 * 1024 * 1024
    runtime.init()
    props = runtime.get_device_properties(0)
    print(f"device: {props.name} [{props.backend}], {props.total_memory / 1024**3:.2f} GB, "
          f"{props.compute_units} compute units")

    host_in = np.random.rand(n).astype(np.float32)
    host_out = np.empty_like(host_in)
    dev_in = runtime.alloc(host_in.nbytes)
    dev_out = runtime.alloc(host_in.nbytes)
    copy_stream, compute_stream = runtime.Stream(), runtime.Stream()

    t0 = time.perf_counter()
    my_kernel.compiled(dev_in, dev_out, n)  # compile outside the timed region (cached on disk afterwards)
    compile_s = time.perf_counter() - t0

    for run in range(3):  # the first run warms pages and caches; the best of the rest is reported
        start, h2d_done, kernel_done, end = (runtime.Event(enable_timing=True) for _ in range(4))
        t0 = time.perf_counter()
        copy_stream.record(start)
        copy_stream.launch_copy(dev_in, host_in, direction="H2D")
        copy_stream.record(h2d_done)          # the one event that orders the two streams
        compute_stream.wait(h2d_done)
        compute_stream.launch_kernel(my_kernel, dev_in, dev_out, n)
        compute_stream.record(kernel_done)
        compute_stream.launch_copy(host_out, dev_out, direction="D2H")
        compute_stream.record(end)
        compute_stream.synchronize()
        wall_ms = (time.perf_counter() - t0) * 1e3
        gb = host_in.nbytes / 1e9
        h2d, k, d2h = start.elapsed_time(h2d_done), h2d_done.elapsed_time(kernel_done), kernel_done.elapsed_time(end)
        print(f"run {run}: H2D {h2d:7.3f} ms ({gb / (h2d / 1e3):6.2f} GB/s)  kernel {k:7.3f} ms  "
              f"D2H {d2h:7.3f} ms ({gb / (d2h / 1e3):6.2f} GB/s)  total {start.elapsed_time(end):7.3f} ms  "
              f"(host wall {wall_ms:7.3f} ms)")

    ok = np.array_equal(host_out, host_in * 2)
    print(f"compile (or disk-cache load) of my_kernel: {compile_s * 1e3:.1f} ms")
    print(f"result: {host_out[:4]} ... (= 2 * input: {'OK' if ok else 'WRONG'}) over {n} floats")
    runtime.free(dev_in)
    runtime.free(dev_out)
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
