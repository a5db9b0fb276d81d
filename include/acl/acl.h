/* acl/acl.h — the AscendCL entry header: initialisation, versions, error messages, and the runtime API (acl_rt.h).
 * AscendCL here runs over this project's runtime: AscendCL device i is the runtime's device i (the cpu device by
 * default, a GPU with RUNTIME_BACKEND=cuda). See docs/ascendcl.md for what is supported and what is emulated. */
#ifndef ACL_ACL_H
#define ACL_ACL_H

#include "acl_base.h"
#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Starts AscendCL. `configPath` is NULL, "" or the path of a JSON configuration file (a file that cannot be read:
 *  ACL_ERROR_INVALID_FILE; not a JSON object: ACL_ERROR_PARSE_FILE). Its settings (dump, profiling, error-message
 *  mode) are not acted on here; a file that holds any says so once on stderr. A second aclInit without
 *  aclFinalize: ACL_ERROR_REPEAT_INITIALIZE. aclInit may follow aclFinalize. */
ACL_FUNC_VISIBILITY aclError aclInit(const char* configPath);
/** Waits for all work, releases every device, context, stream, event, allocation and model instance, and stops
 *  AscendCL. Not initialised: ACL_ERROR_REPEAT_FINALIZE after an earlier aclFinalize, else ACL_ERROR_UNINITIALIZE.
 *  Called from a host function or a callback (work the wait would include): ACL_ERROR_RT_NO_PERMISSION, and nothing
 *  changes. Not to be called while other threads make AscendCL calls. */
ACL_FUNC_VISIBILITY aclError aclFinalize(void);

/** The version of this library (the ACL_*_VERSION of acl_rt.h it was built with). Needs no aclInit. */
ACL_FUNC_VISIBILITY aclError aclrtGetVersion(int32_t* majorVersion, int32_t* minorVersion, int32_t* patchVersion);

/** The messages of the calls that failed on this thread since the last aclGetRecentErrMsg, newest first, one per
 *  line; then clears them. NULL when there are none. The string stays valid until this thread's next call of it. */
ACL_FUNC_VISIBILITY const char* aclGetRecentErrMsg(void);

#ifdef __cplusplus
}
#endif

#endif /* ACL_ACL_H */
