//! A one-host, two-GPU run shaped like a JAX capture on NVIDIA GPUs: a host thread with step
//! roots (`_r`, `step_num`) launching kernels through the CUDA driver (`cuLaunchKernel` with a
//! `correlation_id`), and on each GPU a compute stream (XLA kernels with `hlo_op`,
//! `hlo_module`, `program_id` and `kernel_details`; an NCCL all-reduce; a half-precision
//! fusion kernel) and a copy stream (host-to-device and device-to-host memcpys). No kernel
//! carries FLOPs or bytes: XProf takes them from the HLO cost model. XProf 2.24.2's output for
//! this run is what the views' parity tests compare with (`crates/views/tests/data/
//! synthetic-gpu/`, made with `../shared/tools/oracle` from [`write_gpu_run`]).

use crate::xprof_proto::xla::{self, PrimitiveType as T};
use crate::{
    LineBuilder, PlaneBuilder, XSpaceBuilder, hlo_instr, hlo_matmul, hlo_module_proto,
    hlo_multiply_add_body, hlo_param, hlo_shape, hlo_sum_reducer,
};

/// The program id of `jit_gpustep`.
pub const PROGRAM: u64 = 5;
const US: i64 = 1_000_000;

/// jit_gpustep(5): `dot.1 = f32[256,256] dot(p0 f32[256,512], p1 f32[512,256])`, `add.2`,
/// `all-reduce.3`, `fusion.4` (kLoop: multiply then add, in f16) and `copy.5`.
pub fn gpu_hlo() -> xla::HloProto {
    let f32s = |d: &[i64]| hlo_shape(T::F32, d);
    let f16s = |d: &[i64]| hlo_shape(T::F16, d);
    let fused = hlo_multiply_add_body(100, &f16s(&[256, 256]));
    let reducer = hlo_sum_reducer(200);
    let dot = hlo_matmul(3, "dot.1", f32s(&[256, 256]), 1, 2);
    let mut all_reduce = hlo_instr(5, "all-reduce.3", "all-reduce", f32s(&[256, 256]), &[4]);
    all_reduce.called_computation_ids = vec![3];
    let convert = hlo_instr(6, "convert.6", "convert", f16s(&[256, 256]), &[5]);
    let mut fusion = hlo_instr(7, "fusion.4", "fusion", f16s(&[256, 256]), &[6]);
    fusion.fusion_kind = "kLoop".into();
    fusion.called_computation_ids = vec![2];
    let entry = vec![
        hlo_param(1, "p0", f32s(&[256, 512]), 0),
        hlo_param(2, "p1", f32s(&[512, 256]), 1),
        dot,
        hlo_instr(4, "add.2", "add", f32s(&[256, 256]), &[3, 3]),
        all_reduce,
        convert,
        fusion,
        hlo_instr(8, "copy.5", "copy", f16s(&[256, 256]), &[7]),
    ];
    hlo_module_proto(
        "jit_gpustep",
        1,
        // Callees before their callers, as XLA requires.
        vec![(2, "fused", fused), (3, "sum", reducer), (1, "main", entry)],
    )
}

/// Where step `step` starts (steps are 20 µs apart).
fn step_start(step: i64) -> i64 {
    step * 20 * US + 2 * US
}

/// One kernel launch: (kernel name, HLO op or "" for a memcpy, stream: 0 compute / 1 copy,
/// offset in the step, duration), durations differing by GPU and step.
fn launches(gpu: i64, step: i64) -> Vec<(&'static str, &'static str, u8, i64, i64)> {
    vec![
        ("MemcpyHToD", "", 1, US / 2, 800_000 + 100_000 * gpu),
        (
            "gemm_f32_256x256",
            "dot.1",
            0,
            2 * US,
            4 * US + 300_000 * gpu + 100_000 * step,
        ),
        ("add_kernel", "add.2", 0, 6_500_000 + 300_000 * gpu, 700_000),
        (
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            "all-reduce.3",
            0,
            7_500_000 + 300_000 * gpu,
            2 * US + 200_000 * step,
        ),
        (
            "convert_kernel",
            "convert.6",
            0,
            10 * US + 500_000 * gpu,
            300_000,
        ),
        (
            "loop_fusion_half",
            "fusion.4",
            0,
            10_500_000 + 500_000 * gpu,
            900_000,
        ),
        (
            "copy_kernel",
            "copy.5",
            0,
            11_600_000 + 500_000 * gpu,
            400_000,
        ),
        ("MemcpyDToH", "", 1, 13 * US, 600_000 + 200_000 * gpu),
    ]
}

/// A correlation id unique over the run.
fn correlation(gpu: i64, step: i64, k: usize) -> u64 {
    (1000 * (gpu + 1) + 100 * step + k as i64) as u64
}

fn gpu_plane(p: PlaneBuilder, gpu: i64, steps: &[i64]) -> PlaneBuilder {
    let (compute, copy) = (steps.to_vec(), steps.to_vec());
    let kernels = move |mut l: LineBuilder, stream: u8, steps: &[i64]| {
        for &s in steps {
            for (k, (name, op, on, at, d)) in launches(gpu, s).into_iter().enumerate() {
                if on != stream {
                    continue;
                }
                l = l
                    .event(name, step_start(s) + at, d)
                    .stat("correlation_id", correlation(gpu, s, k));
                if op.is_empty() {
                    l = l.stat(
                        "memcpy_details",
                        "kind_src:pageable kind_dst:device size:1048576 dest:0 async:0",
                    );
                } else {
                    l = l
                        .stat("hlo_op", op)
                        .stat("hlo_module", "jit_gpustep")
                        .stat("program_id", PROGRAM)
                        .stat(
                            "kernel_details",
                            "regs:64 static_shared:0 dynamic_shared:49152 grid:132,1,1 \
                             block:256,1,1 occ_pct:50.0",
                        );
                }
            }
        }
        l
    };
    p.stat("device_vendor", "Nvidia")
        .stat("gpu_device_name", "NVIDIA H100 80GB HBM3")
        .stat("compute_cap_major", 9i64)
        .stat("compute_cap_minor", 0i64)
        .stat("clock_rate", 1_980_000.0)
        .stat("core_count", 132i64)
        .stat("memory_bandwidth", 3_350_000_000_000u64)
        .stat("memory_size", 85_899_345_920u64)
        .line_with_id(7, "Stream #7(Compute)", move |l| kernels(l, 0, &compute))
        .line_with_id(13, "Stream #13(MemcpyH2D,MemcpyD2H)", move |l| {
            kernels(l, 1, &copy)
        })
}

/// The run's one host: three steps, two GPUs.
pub fn gpu_host() -> XSpaceBuilder {
    let steps = [0i64, 1, 2];
    XSpaceBuilder::new()
        .hostname("gpuhost")
        .plane("/device:GPU:0", |p| gpu_plane(p.id(1), 0, &steps))
        .plane("/device:GPU:1", |p| gpu_plane(p.id(2), 1, &steps))
        .plane("/host:CPU", |p| {
            p.line_with_id(4242, "python3/4242", |mut l| {
                for s in steps {
                    l = l
                        .event("train_step", step_start(s) - US, 18 * US)
                        .stat("_r", 1i64)
                        .stat("step_num", s);
                    for gpu in 0..2i64 {
                        for (k, (_, op, ..)) in launches(gpu, s).into_iter().enumerate() {
                            let at = step_start(s) - US / 2 + (gpu * 8 + k as i64) * 20_000;
                            let api = if op.is_empty() {
                                "cuMemcpyAsync"
                            } else {
                                "cuLaunchKernel"
                            };
                            l = l
                                .event(api, at, 10_000)
                                .stat("correlation_id", correlation(gpu, s, k));
                        }
                    }
                }
                l
            })
        })
        .plane("/host:metadata", |p| {
            p.hlo_module(PROGRAM as i64, PROGRAM, &gpu_hlo())
        })
}

/// Writes the run as `<logdir>/plugins/profile/<run>/gpuhost.xplane.pb`; returns the run
/// directory.
pub fn write_gpu_run(logdir: &std::path::Path, run: &str) -> std::io::Result<std::path::PathBuf> {
    let file = gpu_host().write_run(logdir, run, "gpuhost")?;
    Ok(file.parent().unwrap_or(logdir).to_path_buf())
}
