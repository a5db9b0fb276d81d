"""Module.unload / garbage collection while launches are queued: the launches complete (the code is released once they
have run), and the module's functions are invalid afterwards (rtModuleUnload under the binding)."""
import threading

import numpy as np
import pytest

import runtime

SRC = """
RT_KERNEL void put(int32_t* out, int32_t v) { if (get_global_id(0) == 0) out[0] = v; }
// test_module_unload.py
"""


def test_unload_with_a_launch_queued_behind_a_host_function(stream):
    gate = threading.Event()
    m = runtime.Module(SRC)
    f = m.get_function("put")
    out = runtime.to_device(np.zeros(1, np.int32))
    stream.launch_host_func(lambda: gate.wait(20))
    stream.launch_kernel(f, out, 42, global_size=(1,), local_size=(1,))
    m.unload()  # never waits for the gate
    with pytest.raises(runtime.Error):
        stream.launch_kernel(f, out, 1, global_size=(1,), local_size=(1,))
    gate.set()
    stream.synchronize()
    assert out.numpy()[0] == 42


def test_collected_module_keeps_queued_launches(stream):
    gate = threading.Event()
    out = runtime.to_device(np.zeros(1, np.int32))
    stream.launch_host_func(lambda: gate.wait(20))
    stream.launch_kernel(runtime.Module(SRC).get_function("put"), out, 7, global_size=(1,), local_size=(1,))
    gate.set()
    stream.synchronize()
    assert out.numpy()[0] == 7
