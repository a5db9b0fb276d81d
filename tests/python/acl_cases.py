"""The pyACL-compatible module `acl` driving the runtime, as a pyACL program does: devices and contexts, copies both
ways through bytes and numpy, events, callbacks with a report thread, capture, DVPP memory, with exact results and
AscendCL's error codes on bad input.

Run by test_acl.py in a pytest process of its own: acl owns the runtime of its process as a pyACL program does (an
aclrtResetDevice releases everything of the device, an rtFinalize elsewhere in the process would end acl's objects),
so these cases do not share a process with the other test files."""
import threading

import numpy as np
import pytest

import acl

NPY_INT32 = 5
NPY_FLOAT32 = 11


@pytest.fixture(scope="module")
def ctx():
    """acl initialised with device 0 set and a context of its own current; (context, stream). Finalised at the end."""
    assert acl.init() == acl.ACL_SUCCESS
    assert acl.rt.set_device(0) == acl.ACL_SUCCESS
    context, ret = acl.rt.create_context(0)
    assert ret == acl.ACL_SUCCESS and context != 0
    stream, ret = acl.rt.create_stream()
    assert ret == acl.ACL_SUCCESS and stream != 0
    yield context, stream
    assert acl.rt.set_context(context) == acl.ACL_SUCCESS
    assert acl.rt.destroy_stream(stream) == acl.ACL_SUCCESS
    assert acl.rt.destroy_context(context) == acl.ACL_SUCCESS
    assert acl.rt.reset_device(0) == acl.ACL_SUCCESS
    assert acl.finalize() == acl.ACL_SUCCESS


@pytest.fixture
def current(ctx):
    """The module's context, made current again (a test may have left another current)."""
    assert acl.rt.set_context(ctx[0]) == acl.ACL_SUCCESS
    return ctx


def expect_error(ret, code, *words):
    """`ret` is `code`, and the thread's recent message names every one of `words`."""
    assert ret == code, f"returned {ret}, expected {code}"
    msg = acl.get_recent_err_msg()
    assert msg, "no recent error message"
    for word in words:
        assert word in msg, f"{word!r} not in {msg!r}"


def test_version_and_soc_name():
    assert acl.get_version() == (1, 0, 0, acl.ACL_SUCCESS)
    assert acl.get_soc_name().startswith("runtime-")


def test_devices_and_contexts(current):
    context, _ = current
    count, ret = acl.rt.get_device_count()
    assert ret == acl.ACL_SUCCESS and count >= 1
    assert acl.rt.get_device() == (0, acl.ACL_SUCCESS)
    assert acl.rt.get_context() == (context, acl.ACL_SUCCESS)
    assert acl.rt.get_run_mode() == (acl.ACL_HOST, acl.ACL_SUCCESS)
    free, total, ret = acl.rt.get_mem_info(acl.ACL_HBM_MEM)
    assert ret == acl.ACL_SUCCESS and 0 < free <= total
    expect_error(acl.rt.set_device(count), acl.ACL_ERROR_RT_INVALID_DEVICEID)


def test_copies_both_ways_with_bytes_and_numpy(current):
    _, stream = current
    host = np.arange(1024, dtype=np.int32) * 3 - 7
    dev_a, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    assert ret == acl.ACL_SUCCESS and dev_a != 0
    dev_b, ret = acl.rt.malloc(host.nbytes, acl.ACL_MEM_MALLOC_NORMAL_ONLY)
    assert ret == acl.ACL_SUCCESS
    pinned, ret = acl.rt.malloc_host(host.nbytes)
    assert ret == acl.ACL_SUCCESS
    try:
        assert acl.rt.memcpy(dev_a, host.nbytes, acl.util.numpy_to_ptr(host), host.nbytes,
                             acl.ACL_MEMCPY_HOST_TO_DEVICE) == acl.ACL_SUCCESS
        assert acl.rt.memset_async(dev_b, host.nbytes, 0xAB, host.nbytes, stream) == acl.ACL_SUCCESS
        assert acl.rt.memcpy_async(dev_b, host.nbytes, dev_a, host.nbytes // 2, acl.ACL_MEMCPY_DEVICE_TO_DEVICE,
                                   stream) == acl.ACL_SUCCESS
        assert acl.rt.memcpy_async(pinned, host.nbytes, dev_b, host.nbytes, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                                   stream) == acl.ACL_SUCCESS
        assert acl.rt.synchronize_stream(stream) == acl.ACL_SUCCESS
        view = acl.util.ptr_to_numpy(pinned, (1024,), NPY_INT32)
        assert view.dtype == np.int32 and view.shape == (1024,)
        np.testing.assert_array_equal(view[:512], host[:512])
        assert (view[512:].view(np.uint8) == 0xAB).all()
        # D2H into a bytes object through its address, as pyACL programs do.
        out = bytes(host.nbytes)
        assert acl.rt.memcpy(acl.util.bytes_to_ptr(out), host.nbytes, dev_a, host.nbytes,
                             acl.ACL_MEMCPY_DEVICE_TO_HOST) == acl.ACL_SUCCESS
        np.testing.assert_array_equal(np.frombuffer(out, np.int32), host)
        assert acl.util.ptr_to_bytes(pinned, 8) == view[:2].tobytes()
        # The view writes through: H2D from it reaches the device.
        view[:] = 5
        assert acl.rt.memcpy(dev_b, host.nbytes, pinned, host.nbytes, acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        back = np.empty(1024, np.int32)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(back), back.nbytes, dev_b, back.nbytes,
                             acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert (back == 5).all()

        # AscendCL's codes on bad input, each with a message.
        expect_error(acl.rt.memcpy(dev_b, 16, dev_a, 32, acl.ACL_MEMCPY_DEVICE_TO_DEVICE), acl.ACL_ERROR_INVALID_PARAM,
                     "destMax")
        expect_error(acl.rt.memcpy(dev_b, 32, dev_a, 32, 99), acl.ACL_ERROR_INVALID_PARAM)
        expect_error(acl.rt.memcpy(0, 32, dev_a, 32, acl.ACL_MEMCPY_DEVICE_TO_DEVICE), acl.ACL_ERROR_INVALID_PARAM)
        expect_error(acl.rt.memset(dev_b, 8, 0, 16), acl.ACL_ERROR_INVALID_PARAM)
        ptr, ret = acl.rt.malloc(0, acl.ACL_MEM_MALLOC_HUGE_FIRST)
        assert ptr == 0
        expect_error(ret, acl.ACL_ERROR_INVALID_PARAM)
        expect_error(acl.rt.free(0), acl.ACL_ERROR_INVALID_PARAM)
    finally:
        assert acl.rt.free(dev_a) == acl.ACL_SUCCESS
        assert acl.rt.free(dev_b) == acl.ACL_SUCCESS
        assert acl.rt.free_host(pinned) == acl.ACL_SUCCESS


def test_events_order_streams_and_time(current):
    _, stream = current
    other, ret = acl.rt.create_stream()
    assert ret == 0
    start, ret = acl.rt.create_event()
    assert ret == 0
    done, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_TIME_LINE)
    assert ret == 0
    untimed, ret = acl.rt.create_event_with_flag(acl.ACL_EVENT_SYNC)
    assert ret == 0
    dev, _ = acl.rt.malloc(4096, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    host = np.zeros(4096, np.uint8)
    try:
        assert acl.rt.record_event(start, stream) == 0
        assert acl.rt.memset_async(dev, 4096, 7, 4096, stream) == 0
        assert acl.rt.record_event(done, stream) == 0
        assert acl.rt.record_event(untimed, stream) == 0
        # A stream waits only for ACL_EVENT_SYNC events (AscendCL's rule).
        assert acl.rt.stream_wait_event(other, done) == acl.ACL_ERROR_INVALID_PARAM
        # `other` copies only after the memset: it waits for the event, the host does not.
        assert acl.rt.stream_wait_event(other, untimed) == 0
        assert acl.rt.memcpy_async(acl.util.numpy_to_ptr(host), 4096, dev, 4096, acl.ACL_MEMCPY_DEVICE_TO_HOST,
                                   other) == 0
        assert acl.rt.synchronize_stream(other) == 0
        assert (host == 7).all()
        assert acl.rt.synchronize_event(done) == 0
        assert acl.rt.query_event_status(done) == (acl.ACL_EVENT_RECORDED_STATUS_COMPLETE, 0)
        assert acl.rt.synchronize_stream(stream) == 0
        assert acl.rt.stream_query(stream) == (acl.ACL_STREAM_STATUS_COMPLETE, 0)
        ms, ret = acl.rt.event_elapsed_time(start, done)
        assert ret == 0 and ms >= 0.0
        ms, ret = acl.rt.event_elapsed_time(start, untimed)
        expect_error(ret, acl.ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID)
        _, ret = acl.rt.create_event_with_flag(0x4000_0000)
        expect_error(ret, acl.ACL_ERROR_INVALID_PARAM)
    finally:
        assert acl.rt.free(dev) == 0
        for event in (start, done, untimed):
            assert acl.rt.destroy_event(event) == 0
        assert acl.rt.destroy_stream(other) == 0


def report_loop(args):
    """A report thread's function, as pyACL samples write it: set the context, serve callbacks until told to stop."""
    context, state = args
    acl.rt.set_context(context)
    state["subscribed"].wait()  # serve reports once a stream is bound to this thread
    while not state["stop"]:
        ret = acl.rt.process_report(50)
        if ret not in (acl.ACL_SUCCESS, acl.ACL_ERROR_RT_REPORT_TIMEOUT):
            state["unexpected"].append(ret)


def test_callbacks_run_in_the_report_thread_with_their_user_data(current):
    context, stream = current
    state = {"stop": False, "unexpected": [], "subscribed": threading.Event()}
    tid, ret = acl.util.start_thread(report_loop, [context, state])
    assert ret == acl.ACL_SUCCESS and tid != 0
    pinned, _ = acl.rt.malloc_host(64)
    dev, _ = acl.rt.malloc(64, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    seen = []
    try:
        assert acl.rt.subscribe_report(tid, stream) == 0
        state["subscribed"].set()
        expect_error(acl.rt.subscribe_report(tid, stream), acl.ACL_ERROR_RT_STREAM_SUBSCRIBE)
        slots = acl.util.ptr_to_numpy(pinned, (16,), NPY_INT32)
        slots[:] = -1

        def callback(user_data):
            index, label = user_data
            seen.append((index, label, threading.get_ident()))
            slots[index] = 100 + index  # read by the copy queued after this (blocking) callback

        for i in range(4):
            data = [i, f"cb{i}"]
            block = acl.ACL_CALLBACK_BLOCK if i % 2 == 0 else acl.ACL_CALLBACK_NO_BLOCK
            assert acl.rt.launch_callback(callback, data, block, stream) == 0
            if block == acl.ACL_CALLBACK_BLOCK:
                assert acl.rt.memcpy_async(dev + 4 * i, 4, pinned + 4 * i, 4, acl.ACL_MEMCPY_HOST_TO_DEVICE,
                                           stream) == 0
        assert acl.rt.synchronize_stream(stream) == 0
        for _ in range(2000):  # non-blocking callbacks may still be running: wait for them, with a deadline
            if len(seen) == 4:
                break
            threading.Event().wait(0.005)
        assert sorted(s[:2] for s in seen) == [(i, f"cb{i}") for i in range(4)]
        assert {s[2] for s in seen} == {tid}
        out = np.full(16, -1, np.int32)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), 64, dev, 64, acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert out[0] == 100 and out[2] == 102
    finally:
        # Stop the thread before unbinding it: an unbound thread's process_report fails.
        state["stop"] = True
        state["subscribed"].set()
        assert acl.util.stop_thread(tid) == acl.ACL_SUCCESS
        acl.rt.free(dev)
        acl.rt.free_host(pinned)
    assert state["unexpected"] == []
    assert acl.rt.unsubscribe_report(tid, stream) == 0
    expect_error(acl.rt.unsubscribe_report(tid, stream), acl.ACL_ERROR_RT_STREAM_SUBSCRIBE)
    expect_error(acl.rt.launch_callback(callback, [0, ""], acl.ACL_CALLBACK_BLOCK, stream),
                 acl.ACL_ERROR_RT_STREAM_NO_CB_REG)
    expect_error(acl.rt.process_report(10), acl.ACL_ERROR_RT_THREAD_SUBSCRIBE)
    with pytest.raises(TypeError):
        acl.rt.launch_callback("not callable", [], acl.ACL_CALLBACK_BLOCK, stream)
    assert acl.util.stop_thread(tid) == acl.ACL_ERROR_INVALID_PARAM


def test_host_func_gets_its_args(current):
    _, stream = current
    got = []
    args = {"k": 1}
    assert acl.rt.launch_host_func(stream, got.append, args) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    assert got == [args] and got[0] is args


def test_capture_replays_with_current_inputs(current):
    _, stream = current
    n = 256
    src = np.arange(n, dtype=np.float32)
    dev_a, _ = acl.rt.malloc(src.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    dev_b, _ = acl.rt.malloc(src.nbytes, acl.ACL_MEM_MALLOC_HUGE_FIRST)
    out = np.zeros(n, np.float32)
    try:
        assert acl.rt.memcpy(dev_a, src.nbytes, acl.util.numpy_to_ptr(src), src.nbytes,
                             acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
        assert acl.rt.memset(dev_b, src.nbytes, 0, src.nbytes) == 0
        assert acl.mdl.ri_capture_begin(stream, acl.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) == 0
        status, model_ri, ret = acl.mdl.ri_capture_get_info(stream)
        assert (status, ret) == (acl.ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE, 0) and model_ri != 0
        assert acl.rt.memcpy_async(dev_b, src.nbytes, dev_a, src.nbytes, acl.ACL_MEMCPY_DEVICE_TO_DEVICE, stream) == 0
        captured, ret = acl.mdl.ri_capture_end(stream)
        assert ret == 0 and captured == model_ri
        assert acl.mdl.ri_capture_get_info(stream) == (acl.ACL_MODEL_RI_CAPTURE_STATUS_NONE, 0, 0)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, dev_b, out.nbytes,
                             acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        assert (out == 0).all(), "captured work ran before the instance was executed"
        for scale in (1, 2):
            data = src * scale
            assert acl.rt.memcpy(dev_a, data.nbytes, acl.util.numpy_to_ptr(data), data.nbytes,
                                 acl.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            assert acl.mdl.ri_execute_async(captured, stream) == 0
            assert acl.rt.synchronize_stream(stream) == 0
            assert acl.rt.memcpy(acl.util.numpy_to_ptr(out), out.nbytes, dev_b, out.nbytes,
                                 acl.ACL_MEMCPY_DEVICE_TO_HOST) == 0
            np.testing.assert_array_equal(out, data)
        assert acl.mdl.ri_destroy(captured) == 0
        expect_error(acl.mdl.ri_destroy(captured), acl.ACL_ERROR_INVALID_PARAM)
        _, ret = acl.mdl.ri_capture_end(stream)
        expect_error(ret, acl.ACL_ERROR_RT_STREAM_NOT_CAPTURED)
    finally:
        acl.rt.free(dev_a)
        acl.rt.free(dev_b)


def test_dvpp_memory(current):
    ptr, ret = acl.media.dvpp_malloc(1000)
    assert ret == acl.ACL_SUCCESS and ptr != 0
    assert ptr % 128 == 0  # DVPP's buffers start 128-byte aligned
    assert acl.media.dvpp_free(ptr) == acl.ACL_SUCCESS
    ptr, ret = acl.media.dvpp_malloc(0)
    assert ptr == 0
    expect_error(ret, acl.ACL_ERROR_INVALID_PARAM)
