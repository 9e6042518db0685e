// Build-only: txl.h and the shim's header are usable from C++.
#include "txl.h"
#include "txl-spm.h"

int
main()
{
	txl_sampler_params p = txl_sampler_params_default();
	return p.temp > 0 && TXL_HAS(txl_sampler_params, &p, seed) ? 0 : 1;
}
