/* Build-only: txl.h is self-contained pedantic C11. */
#include "txl.h"

int
main(void)
{
	struct txl_session_params p = txl_session_params_default();
	return p.mem_len == TXL_FROM_MODEL &&
		TXL_HAS(struct txl_session_params, &p, kv_type) ? 0 : 1;
}
