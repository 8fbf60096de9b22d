-- Peak dense throughput and memory bandwidth per GPU model, from the vendors' data sheets (no sparsity: figures
-- given "with sparsity" are halved; FP32 is the non-tensor-core rate, FP16 the FP16/BF16 tensor-core or matrix-core
-- rate, FP8 its FP8 rate), matched to deviceProperties.name by a case-insensitive regex on the whole model
-- number (\b on both sides: GH200 is not an H200, H20 not an H200, GB200 not a B200); the first match by priority
-- wins. Units: TFLOP/s and TB/s (10^12). source names the data sheet of the row's figures.
-- source: vendor data sheets (see each row's source)
select
    priority, name_pattern, model,
    fp64_tflops::double as fp64_tflops, fp32_tflops::double as fp32_tflops, fp16_tflops::double as fp16_tflops,
    fp8_tflops::double as fp8_tflops, hbm_tb_per_s::double as hbm_tb_per_s, source
from (values
    (1, '\bH100\b.*PCIe', 'NVIDIA H100 PCIe', 25.6, 51.2, 756.0, 1513.0, 2.0, 'NVIDIA H100 Tensor Core GPU data sheet'),
    (2, '\bH100\b', 'NVIDIA H100 SXM', 33.5, 66.9, 989.4, 1978.9, 3.35, 'NVIDIA H100 Tensor Core GPU data sheet'),
    (3, '\bH200\b', 'NVIDIA H200 SXM', 33.5, 66.9, 989.4, 1978.9, 4.8, 'NVIDIA H200 Tensor Core GPU data sheet'),
    -- the Hopper GPU of a Grace Hopper superchip; "GH200 480GB" is the 96 GB HBM3 part (4 TB/s)
    (4, '\bGH200\b', 'NVIDIA GH200', 34.0, 67.0, 989.4, 1978.9, 4.0, 'NVIDIA GH200 Grace Hopper Superchip data sheet'),
    -- the export Hopper: FP16/BF16 296 and FP8 592 TFLOPS with sparsity
    (5, '\bH20\b', 'NVIDIA H20', 1.0, 44.0, 148.0, 296.0, 4.0, 'NVIDIA H20 product brief'),
    (6, '\bA100\b.*(80GB|SXM4-80)', 'NVIDIA A100 80GB SXM', 9.7, 19.5, 312.0, null, 2.039,
        'NVIDIA A100 Tensor Core GPU data sheet'),
    (7, '\bA100\b.*PCIE', 'NVIDIA A100 40GB PCIe', 9.7, 19.5, 312.0, null, 1.555,
        'NVIDIA A100 Tensor Core GPU data sheet'),
    (8, '\bA100\b', 'NVIDIA A100 40GB SXM', 9.7, 19.5, 312.0, null, 1.555, 'NVIDIA A100 Tensor Core GPU data sheet'),
    (9, '\bV100\b', 'NVIDIA V100 SXM2', 7.8, 15.7, 125.0, null, 0.9, 'NVIDIA Tesla V100 GPU data sheet'),
    (10, '\bL4\b', 'NVIDIA L4', 0.49, 30.3, 121.0, 242.5, 0.3, 'NVIDIA L4 Tensor Core GPU data sheet'),
    (11, '\bA10\b', 'NVIDIA A10', 0.98, 31.2, 125.0, null, 0.6, 'NVIDIA A10 Tensor Core GPU data sheet'),
    (12, '\bT4\b', 'NVIDIA T4', 0.25, 8.1, 65.0, null, 0.32, 'NVIDIA T4 Tensor Core GPU data sheet'),
    (13, '\bMI300X\b', 'AMD Instinct MI300X', 81.7, 163.4, 1307.4, 2614.9, 5.3, 'AMD Instinct MI300X data sheet'),
    (14, '\bMI325X\b', 'AMD Instinct MI325X', 81.7, 163.4, 1307.4, 2614.9, 6.0, 'AMD Instinct MI325X data sheet'),
    -- FP16/BF16 5.0 and FP8 10.1 PFLOPS with sparsity
    (15, '\bMI355X\b', 'AMD Instinct MI355X', 78.6, 157.3, 2516.6, 5033.2, 8.0, 'AMD Instinct MI355X data sheet'),
    (16, '\bMI250X\b', 'AMD Instinct MI250X', 47.9, 47.9, 383.0, null, 3.2, 'AMD Instinct MI250X data sheet'),
    (17, '\bMI250\b', 'AMD Instinct MI250', 45.3, 45.3, 362.1, null, 3.2, 'AMD Instinct MI250 data sheet'),
    (18, '\bMI210\b', 'AMD Instinct MI210', 22.6, 22.6, 181.0, null, 1.6, 'AMD Instinct MI210 data sheet'),
    -- per GPU of the NVL72 rack (up to 1,200 W): FP16/BF16 5 and FP8 10 PFLOPS with sparsity
    (19, '\bGB200\b', 'NVIDIA GB200', 40.0, 80.0, 2500.0, 5000.0, 8.0, 'NVIDIA GB200 NVL72 specifications'),
    -- per GPU of HGX B200 (up to 1,000 W): FP16/BF16 4.5 and FP8 9 PFLOPS with sparsity
    (20, '\bB200\b', 'NVIDIA B200', 37.0, 75.0, 2250.0, 4500.0, 7.7, 'NVIDIA HGX B200 specifications')
) as peaks(priority, name_pattern, model, fp64_tflops, fp32_tflops, fp16_tflops, fp8_tflops, hbm_tb_per_s, source)
