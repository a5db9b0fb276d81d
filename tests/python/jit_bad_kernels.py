"""Kernels that use unsupported Python: each must raise runtime.CompileError naming this file, the line and the construct."""
import runtime


@runtime.jit
def uses_list_comprehension(x):
    i = runtime.get_global_id()
    y = [j for j in range(3)]  # LINE:list comprehension


@runtime.jit
def uses_try(x):
    i = runtime.get_global_id()
    try:  # LINE:try statement
        x[i] = 1
    except Exception:
        pass


@runtime.jit
def uses_unknown_call(x):
    i = runtime.get_global_id()
    x[i] = len(x)  # LINE:len


@runtime.jit
def uses_tuple_index(x):
    i = runtime.get_global_id()
    x[i, 0] = 1.0  # LINE:tuple


@runtime.jit
def uses_string(x):
    i = runtime.get_global_id()
    x[i] = "a"  # LINE:str


@runtime.jit
def returns_value(x):
    i = runtime.get_global_id()
    return x[i]  # LINE:return with a value


@runtime.jit
def uses_lambda(x):
    i = runtime.get_global_id()
    f = lambda v: v  # LINE:lambda
    x[i] = f(1)


@runtime.jit
def uses_for_over_buffer(x):
    for v in x:  # LINE:range
        pass


@runtime.jit
def uses_undefined_name(x):
    i = runtime.get_global_id()
    x[i] = nonexistent_name  # LINE:not defined


@runtime.jit
def assigns_buffer(x):
    x = 1  # LINE:buffer parameter


@runtime.jit
def uses_is(x):
    i = runtime.get_global_id()
    if i is None:  # LINE:'is' comparison
        x[i] = 0


@runtime.jit
def uses_with(x):
    with open("f"):  # LINE:with statement
        pass


@runtime.jit
def uses_dynamic_dim(x, d):
    x[0] = runtime.get_global_id(d)  # LINE:constant


# ---- work-groups, local arrays, device functions, shaped arrays, print (issue 13)
import numpy as np  # noqa: E402


@runtime.jit
def barrier_in_divergent_if(x):
    if runtime.get_local_id(0) < 2:  # LINE:divergent control flow
        runtime.barrier()


@runtime.jit
def barrier_in_per_item_loop(x):
    i = runtime.get_global_id(0)
    for k in range(i):  # LINE:per-item value 'i'
        runtime.barrier()


@runtime.jit
def barrier_in_while_on_memory_index(x):
    i = runtime.get_local_id(0)
    while x[i] > 0:  # LINE:per-item value 'i'
        runtime.barrier()


@runtime.jit
def barrier_loop_over_reassigned_parameter(out, n):
    n = runtime.get_local_id(0)
    c = 0
    for _ in range(n):  # LINE:per-item value 'n'
        runtime.barrier()
        c += 1
    out[runtime.get_global_id(0)] = c


@runtime.jit
def parameter_assigned_per_item(out, n):
    if runtime.get_local_id(0) == 0:
        n = 3  # LINE:parameter 'n' is assigned a per-item value
    runtime.barrier()
    out[runtime.get_global_id(0)] = n


@runtime.jit
def barrier_in_while_reading_memory(done):
    while done[0] == 0:  # LINE:reads memory ('done[0]')
        runtime.barrier()
        if runtime.get_local_id(0) == 0:
            done[0] = 1


@runtime.jit
def barrier_in_for_over_memory_bound(x):
    for k in range(x[0]):  # LINE:range reads memory ('x[0]')
        runtime.barrier()


@runtime.jit
def barrier_in_if_on_local_array(x):
    t = runtime.local_array(4, np.int32)
    t[runtime.get_local_id(0) % 4] = 1
    runtime.barrier()
    if t[0] > 0:  # LINE:condition reads memory ('t[0]')
        runtime.barrier()


@runtime.jit
def return_before_barrier(x):
    i = runtime.get_global_id(0)
    if i > 3:
        return  # LINE:'return' in per-item code
    runtime.barrier()
    x[i] = 1


@runtime.jit
def break_out_of_barrier_loop(x):
    i = runtime.get_global_id(0)
    for k in range(4):
        if x[i] > 0:
            break  # LINE:'break' in per-item code
        runtime.barrier()


@runtime.jit
def barrier_loop_variable_assigned_per_item(x):
    i = runtime.get_global_id(0)
    for k in range(4):  # LINE:also assigned per work-item
        runtime.barrier()
        if i > 2:
            k = 3
        x[i] = k


@runtime.jit
def barrier_as_value(x):
    x[0] = runtime.barrier()  # LINE:statement of its own


@runtime.jit
def barrier_with_argument(x):
    runtime.barrier(1)  # LINE:takes no arguments


@runtime.jit
def local_array_in_if(x):
    i = runtime.get_global_id(0)
    if i > 0:
        t = runtime.local_array(4, np.float32)  # LINE:top level of the kernel body


@runtime.jit
def local_array_runtime_shape(x, n):
    t = runtime.local_array(n, np.float32)  # LINE:constant integer
    t[0] = 1


@runtime.jit
def local_array_bad_dtype(x):
    t = runtime.local_array(4, np.complex64)  # LINE:not a supported dtype
    t[0] = 1


@runtime.jit
def local_array_wrong_rank(x):
    t = runtime.local_array((4, 4), np.float32)
    t[0] = 1.0  # LINE:2 dimension(s)


@runtime.jit
def local_array_as_value(x):
    t = runtime.local_array(4, np.float32)
    x[0] = t  # LINE:used as a value


@runtime.jit
def negative_constant_index(x):
    x[-1] = 0  # LINE:negative index


@runtime.jit
def print_with_file(x):
    print(x[0], file=None)  # LINE:sep= and end=


@runtime.jit
def print_as_value(x):
    x[0] = print(1)  # LINE:statement of its own


@runtime.jit
def unknown_buffer_attribute(x):
    x[0] = x.itemsize  # LINE:buffer attribute itemsize


@runtime.jit
def bad_shape_dimension(x):
    x[0] = x.shape[3]  # LINE:constant dimension


@runtime.jit
def unpacks_a_tuple(x):
    i = runtime.get_global_id(0)
    y, z = i, i  # LINE:unsupported construct 'unpacking assignment'
    x[y] = z
