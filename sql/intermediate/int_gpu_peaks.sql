-- Peak dense throughput and memory bandwidth per GPU model, from the vendors' data sheets (no sparsity: figures
-- given "with sparsity" are halved; FP32 is the non-tensor-core rate, FP16 the FP16/BF16 tensor-core or matrix-core
-- rate, FP8 its FP8 rate), matched to deviceProperties.name by a case-insensitive regex; the first match by
-- priority wins. Units: TFLOP/s and TB/s (10^12). source names the data sheet of the row's figures.
-- source: vendor data sheets (see each row's source)
select
    priority, name_pattern, model,
    fp64_tflops::double as fp64_tflops, fp32_tflops::double as fp32_tflops, fp16_tflops::double as fp16_tflops,
    fp8_tflops::double as fp8_tflops, hbm_tb_per_s::double as hbm_tb_per_s, source
from (values
    (1, 'H100.*PCIe', 'NVIDIA H100 PCIe', 25.6, 51.2, 756.0, 1513.0, 2.0, 'NVIDIA H100 Tensor Core GPU data sheet'),
    (2, 'H100', 'NVIDIA H100 SXM', 33.5, 66.9, 989.4, 1978.9, 3.35, 'NVIDIA H100 Tensor Core GPU data sheet'),
    (3, 'H200', 'NVIDIA H200 SXM', 33.5, 66.9, 989.4, 1978.9, 4.8, 'NVIDIA H200 Tensor Core GPU data sheet'),
    (4, 'A100.*(80GB|SXM4-80)', 'NVIDIA A100 80GB SXM', 9.7, 19.5, 312.0, null, 2.039,
        'NVIDIA A100 Tensor Core GPU data sheet'),
    (5, 'A100.*PCIE', 'NVIDIA A100 40GB PCIe', 9.7, 19.5, 312.0, null, 1.555, 'NVIDIA A100 Tensor Core GPU data sheet'),
    (6, 'A100', 'NVIDIA A100 40GB SXM', 9.7, 19.5, 312.0, null, 1.555, 'NVIDIA A100 Tensor Core GPU data sheet'),
    (7, 'V100', 'NVIDIA V100 SXM2', 7.8, 15.7, 125.0, null, 0.9, 'NVIDIA Tesla V100 GPU data sheet'),
    (8, 'L4\b', 'NVIDIA L4', 0.49, 30.3, 121.0, 242.5, 0.3, 'NVIDIA L4 Tensor Core GPU data sheet'),
    (9, 'A10\b', 'NVIDIA A10', 0.98, 31.2, 125.0, null, 0.6, 'NVIDIA A10 Tensor Core GPU data sheet'),
    (10, 'T4\b', 'NVIDIA T4', 0.25, 8.1, 65.0, null, 0.32, 'NVIDIA T4 Tensor Core GPU data sheet'),
    (11, 'MI300X', 'AMD Instinct MI300X', 81.7, 163.4, 1307.4, 2614.9, 5.3, 'AMD Instinct MI300X data sheet'),
    (12, 'MI250X', 'AMD Instinct MI250X', 47.9, 47.9, 383.0, null, 3.2, 'AMD Instinct MI250X data sheet'),
    (13, 'MI250', 'AMD Instinct MI250', 45.3, 45.3, 362.1, null, 3.2, 'AMD Instinct MI250 data sheet'),
    (14, 'MI210', 'AMD Instinct MI210', 22.6, 22.6, 181.0, null, 1.6, 'AMD Instinct MI210 data sheet'),
    -- per GPU of the NVL72 rack (up to 1,200 W): FP16/BF16 5 and FP8 10 PFLOPS with sparsity
    (15, 'GB200', 'NVIDIA GB200', 40.0, 80.0, 2500.0, 5000.0, 8.0, 'NVIDIA GB200 NVL72 specifications'),
    -- per GPU of HGX B200 (up to 1,000 W): FP16/BF16 4.5 and FP8 9 PFLOPS with sparsity
    (16, 'B200', 'NVIDIA B200', 37.0, 75.0, 2250.0, 4500.0, 7.7, 'NVIDIA HGX B200 specifications')
) as peaks(priority, name_pattern, model, fp64_tflops, fp32_tflops, fp16_tflops, fp8_tflops, hbm_tb_per_s, source)
