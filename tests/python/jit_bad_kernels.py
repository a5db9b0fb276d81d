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
