/* The GPU model's device description for env.json: the GPU, the library versions and every
 * choice made at create (kernels, fusions, pinned GEMM algorithms). */
#include "model/cuda/model.cuh"

const char *dt_gpt_cuda_describe(dt_gpt_cuda *m) {
    cudaDeviceProp p;
    int dev = 0, drv = 0, rt = 0;
    cudaGetDevice(&dev);
    memset(&p, 0, sizeof p);
    cudaGetDeviceProperties(&p, dev);
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    char algos[16000], algos_w[8000] = "[]", table[256];
    dt_cu_blas_describe(m->blas, algos, sizeof algos);
    if (m->blas_w) dt_cu_blas_describe(m->blas_w, algos_w, sizeof algos_w);
    dt_cu_blas_table_describe(m->blas, table, sizeof table);
    snprintf(m->desc, sizeof m->desc,
             "{\"device\":\"cuda\",\"attention\":\"%s\",\"gemm_epilogues\":{\"gelu\":%s,\"bias_grad\":%s,"
             "\"asked\":\"%s\"},\"gemm_k_chunks\":\"%s\",\"layernorm_bias_colsum\":\"%s\",\"gpu\":\"%s\","
             "\"sm\":\"%d.%d\",\"sms\":%d,\"driver\":%d,"
             "\"runtime\":%d,\"cublaslt\":%zu,\"nvcc_flags\":\"%s\",\"gemm_workspace\":%u,"
             "\"gemm_table\":%s,\"gemm_algos\":%s,\"bwd_overlap\":\"%s\",\"gemm_algos_weight_stream\":%s,"
             "\"cuda_graphs\":\"%s\",\"gemm_own\":\"%s\",\"fc_bias_grad\":\"%s\",\"attention_d\":\"%s\","
             "\"dw_batch\":\"%s\"}",
             gcu_attention_name(m), m->ch.fuse_gelu ? "true" : "false", m->ch.fuse_bgrad ? "true" : "false",
             m->ch.fusion_note, "dt_cu_gemm_splits",
             m->ch.fuse_bgrad ? "off (bias gradients from the GEMM epilogue)"
             : m->hidden_dropout > 0.0f ? "off while training (hidden dropout)" : "attproj, fcproj", p.name, p.major,
             p.minor, p.multiProcessorCount, drv, rt, cublasLtGetVersion(), DT_NVCC_FLAGS, DT_CU_GEMM_WORKSPACE,
             table, algos, m->ch.overlap ? "weight gradients on a second stream (--bwd-overlap on)" : "off", algos_w,
             m->ch.graphs ? "on: zero_grad, forward and backward replayed from CUDA graphs (--cuda-graphs on)" : "off",
             m->ch.gemm_own && m->ch.fuse_gelu
                 ? "gelu: fc forward and fcproj input gradient on gemm_wgmma_cuda.cu where their shapes fit its tiles, "
                   "else cuBLASLt (--gemm-own gelu)"
                 : "off",
             m->bp.bias[DT_CU_LIN_FC] == DT_CU_BIAS_GEMM_EPILOGUE ? "the fc weight-gradient GEMM's epilogue"
             : m->bp.bias[DT_CU_LIN_FC] == DT_CU_BIAS_GELU_BWD   ? "the GELU backward's column sums"
             : m->bp.bias[DT_CU_LIN_FC] == DT_CU_BIAS_DGELU_EPILOGUE
                 ? "the fcproj dGELU GEMM's epilogue (gemm_wgmma_cuda.cu)"
                 : "a column sum of dfch",
             m->bp.ld_from_dot ? "the attproj input-gradient GEMM's DOT epilogue (gemm_wgmma_cuda.cu; --gemm-dot on)"
             : m->ch.flash        ? "the D kernel"
                               : "none (GEMM attention)",
             !m->ch.dw_batch ? "off (--dw-batch off: one weight-gradient GEMM a layer)"
             : m->dqkv_all && m->dfch_all && m->dres_all
                 ? "qkv, fc, fcproj, attproj: every layer's weight gradients in one batched GEMM a kind after the "
                   "layers (--dw-batch on; fcproj and attproj where the bias gradients come from the "
                   "LayerNorm backward's column sums)"
             : m->dqkv_all && m->dfch_all ? "qkv, fc: every layer's qkv and fc weight gradients in one batched GEMM "
                                            "a kind after the layers (--dw-batch on; fcproj and "
                                            "attproj not with hidden dropout)"
             : m->dqkv_all ? "qkv: every layer's qkv weight gradient in one batched GEMM after the layers"
             : m->dfch_all ? "fc: every layer's fc weight gradient in one batched GEMM after the layers (qkv's "
                             "needs flash attention)"
                           : "off: --dw-batch needs flash attention (qkv) or the fc bias gradient from a column "
                             "sum (fc)");
    return m->desc;
}
