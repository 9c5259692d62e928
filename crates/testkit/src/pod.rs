//! A two-host, four-chip TPU run shaped like a JAX capture: host step roots
//! (`StepTraceAnnotation`: `_r`, `step_num`) launching one program per chip per step
//! (`DoEnqueueProgram` → `XLA Modules`, joined by `run_id` and `queue_id`), a `Steps` line, and
//! ops of seven categories (a collective, infeed, outfeed and a call among them), some with a
//! per-memory-space breakdown of their bytes, one a duplicate of another. The hosts overlap on
//! two of their three steps, 3 µs apart on the hosts' clocks, so XProf matches them by time,
//! not by number. XProf 2.24.2's output for this run is what the views' parity tests compare
//! with (`crates/views/tests/data/synthetic-pod/`, made with `../shared/tools/oracle` from
//! [`write_pod_run`]).

use crate::xprof_proto::xla::{self, PrimitiveType as T};
use crate::{
    PlaneBuilder, XSpaceBuilder, hlo_instr, hlo_matmul, hlo_module_proto, hlo_multiply_add_body,
    hlo_param, hlo_shape, hlo_sum_reducer,
};

/// The program id of `jit_pod`.
pub const PROGRAM: u64 = 9;
const US: i64 = 1_000_000;

/// jit_pod(9): `dot.1 = f32[256,256] dot(p0 f32[256,512], p1 f32[512,256])`, `all-reduce.2`,
/// `fusion.3` (kLoop: multiply then add), `copy.4`, `infeed.5` and `outfeed.6` (through the
/// token `after-all.7`), `call.8` (running `copy.c`).
pub fn pod_hlo() -> xla::HloProto {
    let f32s = |d: &[i64]| hlo_shape(T::F32, d);
    let token = || xla::ShapeProto {
        element_type: T::Token as i32,
        ..Default::default()
    };
    let tuple = |parts: Vec<xla::ShapeProto>| xla::ShapeProto {
        element_type: T::Tuple as i32,
        tuple_shapes: parts,
        ..Default::default()
    };
    let fused = hlo_multiply_add_body(100, &f32s(&[256, 256]));
    let reducer = hlo_sum_reducer(200);
    let dot = hlo_matmul(3, "dot.1", f32s(&[256, 256]), 1, 2);
    let mut all_reduce = hlo_instr(4, "all-reduce.2", "all-reduce", f32s(&[256, 256]), &[3]);
    all_reduce.called_computation_ids = vec![3];
    let mut fusion = hlo_instr(5, "fusion.3", "fusion", f32s(&[256, 256]), &[4]);
    fusion.fusion_kind = "kLoop".into();
    fusion.called_computation_ids = vec![2];
    let entry = vec![
        hlo_param(1, "p0", f32s(&[256, 512]), 0),
        hlo_param(2, "p1", f32s(&[512, 256]), 1),
        dot,
        all_reduce,
        fusion,
        hlo_instr(6, "copy.4", "copy", f32s(&[256, 256]), &[5]),
        hlo_instr(9, "after-all.7", "after-all", token(), &[]),
        hlo_instr(
            7,
            "infeed.5",
            "infeed",
            tuple(vec![f32s(&[256]), token()]),
            &[9],
        ),
        {
            let mut o = hlo_instr(8, "outfeed.6", "outfeed", token(), &[6, 9]);
            o.outfeed_shape = Some(Box::new(f32s(&[256, 256])));
            o
        },
        {
            let mut c = hlo_instr(10, "call.8", "call", f32s(&[256, 256]), &[6]);
            c.called_computation_ids = vec![4];
            c
        },
    ];
    let callee = vec![
        hlo_param(401, "cp0", f32s(&[256, 256]), 0),
        hlo_instr(402, "copy.c", "copy", f32s(&[256, 256]), &[401]),
    ];
    hlo_module_proto(
        "jit_pod",
        1,
        // Callees before their callers, as XLA requires.
        vec![
            (2, "fused", fused),
            (3, "sum", reducer),
            (4, "callee", callee),
            (1, "main", entry),
        ],
    )
}

/// XProf's `MemoryAccessBreakdown` of (operation type: 1 read, 2 write; memory space: 1 HBM,
/// 3 VMEM; bytes) entries, as TPU ops carry it in their `memory_access_breakdown` stat.
fn memory_breakdown(entries: &[(u8, u8, u64)]) -> Vec<u8> {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    let mut out = Vec::new();
    for &(kind, space, bytes) in entries {
        let mut m = vec![0x08, kind, 0x10, space, 0x18];
        varint(&mut m, bytes);
        out.push(0x0a);
        varint(&mut out, m.len() as u64);
        out.extend(m);
    }
    out
}

/// The per-memory-space bytes of an op, where the compiler gave some: the dot and the fusion
/// read and write HBM and VMEM; the copy only HBM; the others carry none.
fn breakdown_of(name: &str) -> Option<Vec<u8>> {
    match name {
        "dot.1" => Some(memory_breakdown(&[
            (1, 1, 786_432),
            (2, 1, 262_144),
            (1, 3, 2_097_152),
            (2, 3, 524_288),
        ])),
        "fusion.3" => Some(memory_breakdown(&[
            (1, 1, 262_144),
            (2, 1, 262_144),
            (1, 3, 131_072),
            (2, 3, 65_536),
        ])),
        "copy.4" => Some(memory_breakdown(&[(1, 1, 262_144), (2, 1, 262_144)])),
        _ => None,
    }
}

/// `CoreDetails { device_ordinal, local_chip_id, global_chip_id, global_core_id }`.
fn core_details(ordinal: u8, global: u8) -> Vec<u8> {
    vec![0x10, ordinal, 0x20, ordinal, 0x28, global, 0x30, global]
}

/// Where a step starts on a host's clock: steps are 12 µs apart, host 1 runs 3 µs later.
fn step_start(host: usize, step: i64) -> i64 {
    (step - 5) * 12 * US + host as i64 * 3 * US + 1_000_000
}

/// (name, symbol id, category, FLOPs, bytes, offset in the step, duration): what one chip of
/// host `host` runs in step `step`; durations differ by host, chip and step so that every
/// average and per-core figure is distinct.
fn ops(
    host: usize,
    chip: usize,
    step: i64,
) -> Vec<(&'static str, u64, &'static str, u64, u64, i64, i64)> {
    let (h, c, k) = (host as i64, chip as i64, step - 5);
    let mut v = vec![
        (
            "dot.1",
            3,
            "convolution",
            67_108_864,
            1_310_720,
            US / 2,
            3 * US + 200_000 * c + 500_000 * h,
        ),
        (
            "all-reduce.2",
            4,
            "all-reduce",
            65_536,
            524_288,
            4 * US + 600_000 * h,
            US + 300_000 * h + 100_000 * k,
        ),
        (
            "fusion.3",
            5,
            "loop fusion",
            131_072,
            524_288,
            6 * US + 600_000 * h,
            1_500_000,
        ),
        (
            "copy.4",
            6,
            "data formatting",
            0,
            524_288,
            7_800_000 + 600_000 * h,
            500_000 + 100_000 * c,
        ),
    ];
    if step == 6 {
        v.push((
            "infeed.5",
            7,
            "infeed",
            0,
            1024,
            50_000,
            // Distinct on every core, so that the core with the most infeed is one.
            300_000 + 100_000 * c + 40_000 * h,
        ));
    }
    if host == 0 {
        v.push(("outfeed.6", 8, "outfeed", 0, 4, 9_000_000, 300_000));
    }
    // A call and the op it runs, nested on the line: the call's self time is what its op
    // leaves.
    v.push(("call.8", 10, "call", 0, 0, 9_350_000, 600_000));
    v.push((
        "copy.c",
        11,
        "data formatting",
        0,
        524_288,
        9_450_000,
        300_000 + 50_000 * c,
    ));
    v
}

fn tpu_plane(p: PlaneBuilder, host: usize, chip: usize, steps: &[i64]) -> PlaneBuilder {
    let steps = steps.to_vec();
    let steps2 = steps.clone();
    let steps3 = steps.clone();
    p.stat("device_type_string", "TPU v5 lite")
        .stat("peak_teraflops_per_second", 197.0)
        .stat("peak_hbm_bw_gigabytes_per_second", 819.0)
        .stat("peak_sram_rd_bw_gigabytes_per_second", 20_000.0)
        .stat("peak_sram_wr_bw_gigabytes_per_second", 15_000.0)
        .stat("peak_vmem_rd_bw_gigabytes_per_second", 20_000.0)
        .stat("peak_vmem_wr_bw_gigabytes_per_second", 15_000.0)
        .stat("has_merged_vmem", 1i64)
        .stat("has_megacore", 0i64)
        .stat(
            "core_details",
            core_details(chip as u8, (2 * host + chip) as u8),
        )
        .line("Steps", move |mut l| {
            for &k in &steps {
                l = l.event(&k.to_string(), step_start(host, k), 11 * US);
            }
            l
        })
        .line("XLA Modules", move |mut l| {
            for &k in &steps2 {
                l = l
                    .event("jit_pod(9)", step_start(host, k) + 20_000, 10 * US)
                    .stat("run_id", 100 + k)
                    .stat("queue_id", 0i64)
                    .stat("core_type", 0i64);
            }
            l
        })
        .line("XLA Ops", move |mut l| {
            for &k in &steps3 {
                for (name, sym, cat, flops, bytes, at, d) in ops(host, chip, k) {
                    l = l
                        .event(name, step_start(host, k) + at, d)
                        .metadata_stat("program_id", PROGRAM)
                        .metadata_stat("symbol_id", sym)
                        .metadata_stat("hlo_category", cat)
                        .metadata_stat("flops", flops)
                        .metadata_stat("bytes_accessed", bytes)
                        .metadata_stat("tf_op", format!("jit(pod)/{name}").as_str());
                    if let Some(b) = breakdown_of(name) {
                        l = l.metadata_stat("memory_access_breakdown", b);
                    }
                    // The compiler's name for the op this one duplicates.
                    if name == "copy.c" {
                        l = l.metadata_stat("deduplicated_name", "copy.4");
                    }
                }
            }
            l
        })
}

/// One host's capture: steps `steps`, two chips, the host thread's step roots launching both.
pub fn pod_host(host: usize, steps: &[i64]) -> XSpaceBuilder {
    let s = steps.to_vec();
    XSpaceBuilder::new()
        .hostname(&format!("podhost{host}"))
        .plane("/device:TPU:0", |p| tpu_plane(p, host, 0, steps))
        .plane("/device:TPU:1", |p| tpu_plane(p, host, 1, steps))
        .plane("/host:CPU", move |p| {
            p.line("python", move |mut l| {
                for &k in &s {
                    let t = step_start(host, k) - 800_000;
                    l = l
                        .event("train", t, 11 * US)
                        .stat("_r", 1i64)
                        .stat("step_num", k);
                    for chip in 0..2i64 {
                        l = l
                            .event("DoEnqueueProgram", t + 100_000 + chip * 200_000, 150_000)
                            .stat("run_id", 100 + k)
                            .stat("queue_id", 0i64)
                            .stat("device_ordinal", chip)
                            .stat("core_type", 0i64);
                    }
                }
                l
            })
        })
        .plane("/host:metadata", |p| {
            p.hlo_module(PROGRAM as i64, PROGRAM, &pod_hlo())
        })
}

/// The run: host 0 runs steps 5–7, host 1 steps 6–8.
pub fn pod_run() -> Vec<(String, XSpaceBuilder)> {
    vec![
        ("podhost0".into(), pod_host(0, &[5, 6, 7])),
        ("podhost1".into(), pod_host(1, &[6, 7, 8])),
    ]
}

/// Writes the run as `<logdir>/plugins/profile/<run>/podhost{0,1}.xplane.pb`; returns the
/// run directory.
pub fn write_pod_run(logdir: &std::path::Path, run: &str) -> std::io::Result<std::path::PathBuf> {
    let mut dir = std::path::PathBuf::new();
    for (host, b) in pod_run() {
        dir = b
            .write_run(logdir, run, &host)?
            .parent()
            .unwrap_or(logdir)
            .to_path_buf();
    }
    Ok(dir)
}
