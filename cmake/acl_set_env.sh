# set_env.sh — source this (`. <prefix>/Ascend/ascend-toolkit/set_env.sh`) to build and run AscendCL applications
# against this runtime's CANN-shaped tree. It sets the variables CANN's toolkit script sets, pointing at this tree;
# installed by cmake/acl_install.cmake. Written for sh, bash and zsh; it finds its own folder, so the tree can move.
if [ -n "${BASH_SOURCE:-}" ]; then
    _rt_acl_self="${BASH_SOURCE[0]}"
else
    _rt_acl_self="$0"  # zsh names the sourced file in $0; POSIX sh does not (there, source it from bash or zsh)
fi
_rt_acl_dir="$(cd "$(dirname "${_rt_acl_self}")" && pwd)"
if [ ! -d "${_rt_acl_dir}/latest/lib64" ]; then
    echo "set_env.sh: ${_rt_acl_dir}/latest/lib64 is missing: source this script from its installed folder" >&2
else
    export ASCEND_TOOLKIT_HOME="${_rt_acl_dir}/latest"
    export ASCEND_HOME_PATH="${ASCEND_TOOLKIT_HOME}"
    export ASCEND_AICPU_PATH="${ASCEND_TOOLKIT_HOME}"
    export ASCEND_OPP_PATH="${ASCEND_TOOLKIT_HOME}/opp"
    export TOOLCHAIN_HOME="${ASCEND_TOOLKIT_HOME}/toolkit"
    # The libraries (lib64 holds the real ones; runtime/lib64/stub is for linking only, as in CANN).
    export LD_LIBRARY_PATH="${ASCEND_TOOLKIT_HOME}/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
    # `import acl`: the pyACL-compatible module.
    export PYTHONPATH="${ASCEND_TOOLKIT_HOME}/python/site-packages${PYTHONPATH:+:${PYTHONPATH}}"
    # No tools ship in bin/ yet; the entry keeps scripts that expect it on PATH working unchanged.
    export PATH="${ASCEND_TOOLKIT_HOME}/bin${PATH:+:${PATH}}"
fi
unset _rt_acl_self _rt_acl_dir
