//! A one-host run for the device-time attribution (`get_device_time_attribution`, the
//! summary of XProf's agent-CLI `get_kernel_stats`): a TPU whose `XLA Ops` line has a `%while`
//! covering an op of its body, a custom call, ops named by a `tf_op_name` event stat and by a
//! metadata stat, a `Pallas` kernel line, an `LLO Ops` region line (left out), `XLA Modules`
//! (the steps) and a `Tensor Core` line; and a GPU with a compute stream (an event named by
//! digits, renamed by its `msg` stat) and a counter line (left out of the kernels). Times are
//! picoseconds with sub-nanosecond parts, which XProf's tool truncates to whole nanoseconds.
//! XProf 2.24.2's output is kept in `crates/views/tests/data/synthetic-attribution/`, made from
//! [`write_attribution_run`].

use crate::{LineBuilder, XSpaceBuilder};

/// An XLA op named by its HLO text, as TPU captures name them.
fn op(l: LineBuilder, name: &str, text: &str, start: i64, dur: i64) -> LineBuilder {
    l.event(&format!("%{name} = {text}"), start, dur)
        .display_name(name)
}

/// The run's one host (`host0`).
pub fn attribution_host() -> XSpaceBuilder {
    XSpaceBuilder::new()
        .plane("/device:TPU:0", |p| {
            p.line("XLA Modules", |l| {
                l.event("jit_step(42)", 0, 1_000_400)
                    .event("jit_step(42)", 2_000_000, 900_700)
            })
            .line("XLA Ops", |l| {
                let l = op(l, "while.1", "f32[8] while(p)", 100_000, 400_300);
                let l = op(l, "fusion.2", "f32[8] fusion(x)", 150_000, 100_000);
                let l = op(l, "fusion.2", "f32[8] fusion(x)", 600_500, 100_400);
                let l = op(
                    l,
                    "custom-call.3",
                    "f32[8] custom-call(x), custom_call_target=\"tpu_custom_call\"",
                    800_000,
                    100_000,
                );
                let l = op(l, "fusion.4", "f32[8] fusion(y)", 950_000, 10_000)
                    .stat("tf_op_name", "jit(step)/mul");
                let l = op(l, "fusion.5", "f32[8] fusion(z)", 970_000, 10_000)
                    .metadata_stat("tf_op_name", "jit(step)/add");
                op(l, "fusion.2", "f32[8] fusion(x)", 2_100_000, 300_000)
            })
            .line("Pallas", |l| l.event("flash_attention", 2_500_000, 200_900))
            .line("LLO Ops", |l| l.event("llo_region", 2_500_000, 50_000))
            .line("Tensor Core", |l| l.event("tc", 0, 3_000_000))
        })
        .plane("/device:GPU:0", |p| {
            p.line("Stream #7(Compute)", |l| {
                l.timestamp_ns(5)
                    .event("gemm_kernel", 0, 400_000)
                    .event("12", 500_000, 100_000)
                    .stat("msg", "annotated_region")
                    .event("gemm_kernel", 700_000, 300_500)
            })
            .line("GPU Counters", |l| l.event("sm_active", 0, 2_000_000))
        })
}

/// Writes the run as `<logdir>/plugins/profile/<run>/host0.xplane.pb`; returns the run
/// directory.
pub fn write_attribution_run(
    logdir: &std::path::Path,
    run: &str,
) -> std::io::Result<std::path::PathBuf> {
    let file = attribution_host().write_run(logdir, run, "host0")?;
    Ok(file.parent().unwrap_or(logdir).to_path_buf())
}
