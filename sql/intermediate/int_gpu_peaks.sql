-- Peak dense throughput and memory bandwidth per GPU model, from the vendors' data sheets (no sparsity; FP32 is
-- the non-tensor-core rate, FP16 the FP16/BF16 tensor-core rate), matched to deviceProperties.name by a
-- case-insensitive regex; the first match by priority wins. Units: TFLOP/s and TB/s (10^12).
-- Sources: NVIDIA V100, A100, H100, H200, L4, A10, T4 data sheets; AMD Instinct MI250/MI250X/MI300X data sheets.
-- source: vendor data sheets (see README "op_perf")
select
    priority, name_pattern, model,
    fp64_tflops::double as fp64_tflops, fp32_tflops::double as fp32_tflops, fp16_tflops::double as fp16_tflops,
    fp8_tflops::double as fp8_tflops, hbm_tb_per_s::double as hbm_tb_per_s
from (values
    (1, 'H100.*PCIe', 'NVIDIA H100 PCIe', 25.6, 51.2, 756.0, 1513.0, 2.0),
    (2, 'H100', 'NVIDIA H100 SXM', 33.5, 66.9, 989.4, 1978.9, 3.35),
    (3, 'H200', 'NVIDIA H200 SXM', 33.5, 66.9, 989.4, 1978.9, 4.8),
    (4, 'A100.*(80GB|SXM4-80)', 'NVIDIA A100 80GB SXM', 9.7, 19.5, 312.0, null, 2.039),
    (5, 'A100.*PCIE', 'NVIDIA A100 40GB PCIe', 9.7, 19.5, 312.0, null, 1.555),
    (6, 'A100', 'NVIDIA A100 40GB SXM', 9.7, 19.5, 312.0, null, 1.555),
    (7, 'V100', 'NVIDIA V100 SXM2', 7.8, 15.7, 125.0, null, 0.9),
    (8, 'L4\b', 'NVIDIA L4', 0.49, 30.3, 121.0, 242.5, 0.3),
    (9, 'A10\b', 'NVIDIA A10', 0.98, 31.2, 125.0, null, 0.6),
    (10, 'T4\b', 'NVIDIA T4', 0.25, 8.1, 65.0, null, 0.32),
    (11, 'MI300X', 'AMD Instinct MI300X', 81.7, 163.4, 1307.4, 2614.9, 5.3),
    (12, 'MI250X', 'AMD Instinct MI250X', 47.9, 47.9, 383.0, null, 3.2),
    (13, 'MI250', 'AMD Instinct MI250', 45.3, 45.3, 362.1, null, 3.2)
) as peaks(priority, name_pattern, model, fp64_tflops, fp32_tflops, fp16_tflops, fp8_tflops, hbm_tb_per_s)
