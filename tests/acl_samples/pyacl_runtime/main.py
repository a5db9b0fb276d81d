"""pyACL sample, in the shape pyACL application samples have: init -> device -> context -> stream -> memory and
copies both ways -> an event -> callbacks served by a report thread (acl.util.start_thread) -> teardown. Run with the
toolkit's set_env.sh sourced (its PYTHONPATH finds `acl`); uses no third-party package. Prints PASS when every
result holds."""
import struct
import sys
import threading

import acl

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_MEMCPY_DEVICE_TO_DEVICE = 3
ACL_CALLBACK_BLOCK = 1
ACL_ERROR_RT_REPORT_TIMEOUT = 507012
DEVICE_ID = 0


def check_ret(message, ret):
    if ret != 0:
        raise RuntimeError(f"{message} failed ret={ret}: {acl.get_recent_err_msg()}")


class Sample:
    def __init__(self):
        self.context = None
        self.stream = None
        self.exit_flag = False
        self.subscribed = threading.Event()  # the report thread serves reports once its stream is bound to it
        self.callback_results = []

    def init_resource(self):
        check_ret("acl.init", acl.init())
        check_ret("acl.rt.set_device", acl.rt.set_device(DEVICE_ID))
        self.context, ret = acl.rt.create_context(DEVICE_ID)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)

    def copies(self):
        count = 4096
        data = struct.pack(f"<{count}i", *range(count))
        size = len(data)
        dev_a, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        dev_b, ret = acl.rt.malloc(size, ACL_MEM_MALLOC_HUGE_FIRST)
        check_ret("acl.rt.malloc", ret)
        check_ret("acl.rt.memcpy", acl.rt.memcpy(dev_a, size, acl.util.bytes_to_ptr(data), size,
                                                 ACL_MEMCPY_HOST_TO_DEVICE))
        event, ret = acl.rt.create_event()
        check_ret("acl.rt.create_event", ret)
        check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(dev_b, size, dev_a, size, ACL_MEMCPY_DEVICE_TO_DEVICE,
                                                             self.stream))
        check_ret("acl.rt.record_event", acl.rt.record_event(event, self.stream))
        check_ret("acl.rt.synchronize_event", acl.rt.synchronize_event(event))
        out = bytes(size)
        check_ret("acl.rt.memcpy", acl.rt.memcpy(acl.util.bytes_to_ptr(out), size, dev_b, size,
                                                 ACL_MEMCPY_DEVICE_TO_HOST))
        if out != data:
            raise RuntimeError("the data came back changed")
        check_ret("acl.rt.destroy_event", acl.rt.destroy_event(event))
        check_ret("acl.rt.free", acl.rt.free(dev_a))
        check_ret("acl.rt.free", acl.rt.free(dev_b))

    def process_callback(self, args_list):
        context, timeout = args_list
        acl.rt.set_context(context)
        self.subscribed.wait()
        while not self.exit_flag:
            ret = acl.rt.process_report(timeout)
            if ret not in (0, ACL_ERROR_RT_REPORT_TIMEOUT):
                self.callback_results.append(("process_report", ret))

    def callback_func(self, user_data):
        self.callback_results.append((user_data[0], threading.get_ident()))

    def callbacks(self):
        tid, ret = acl.util.start_thread(self.process_callback, [self.context, 100])
        check_ret("acl.util.start_thread", ret)
        check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(tid, self.stream))
        self.subscribed.set()
        for i in range(3):
            check_ret("acl.rt.launch_callback", acl.rt.launch_callback(self.callback_func, [i], ACL_CALLBACK_BLOCK,
                                                                       self.stream))
        check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(self.stream))
        # Stop the thread before unbinding it: an unbound thread's process_report fails.
        self.exit_flag = True
        check_ret("acl.util.stop_thread", acl.util.stop_thread(tid))
        check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(tid, self.stream))
        if self.callback_results != [(0, tid), (1, tid), (2, tid)]:
            raise RuntimeError(f"callbacks: {self.callback_results}, expected three in order on thread {tid}")

    def release_resource(self):
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(DEVICE_ID))
        check_ret("acl.finalize", acl.finalize())


def main():
    sample = Sample()
    sample.init_resource()
    sample.copies()
    sample.callbacks()
    sample.release_resource()
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
