//! `OpStats`: everything the core views need about one host, and the multi-host combination
//! (XProf `ConvertXSpaceToOpStats`, `op_stats_combiner.cc`).

use std::collections::{BTreeMap, HashMap};

use rayon::prelude::*;

use crate::device::{
    DutyCycle, DutyCycleCombiner, PerfEnv, duty_cycle, gpu_db, gpu_model_name, gpu_perf_env,
    is_gpu_plane, is_sparse_core_plane, is_tpu_tensor_core_plane, local_chip_id, perf_env,
    sparse_core_dbs, tensor_core_db_with,
};
use crate::host::{HOST_THREADS, framework_op_db, host_xla_op_db};
use crate::metrics::{DbCombiner, OpMetricsDb};
use crate::model::{HostEvents, HostSpace, Plane, StatKey};
use crate::steps::{Step, StepDb, StepsSource, infer_module_steps, step_db};

/// XProf's hardware classes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HardwareType {
    Tpu,
    Gpu,
    CpuOnly,
}

impl HardwareType {
    pub fn as_str(self) -> &'static str {
        match self {
            HardwareType::Tpu => "TPU",
            HardwareType::Gpu => "GPU",
            HardwareType::CpuOnly => "CPU_ONLY",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunEnvironment {
    pub hardware_type: HardwareType,
    /// `TPU v6 Lite`, a GPU model, or `CPU`.
    pub device_type: String,
    pub device_core_count: u32,
    pub host_count: u32,
    pub task_count: u32,
    pub hostnames: Vec<String>,
    pub is_training: bool,
}

/// Everything computed from one host's XSpace (or several, combined).
#[derive(Clone, Debug)]
pub struct OpStats {
    pub run_env: RunEnvironment,
    pub perf_env: Option<PerfEnv>,
    /// XLA ops on accelerators (TPU TensorCores / GPUs), combined over cores; IDLE included.
    pub device_db: OpMetricsDb,
    /// Framework ops on host threads (XProf's host op DB; mostly TF/tf.data).
    pub host_db: OpMetricsDb,
    /// XLA ops a CPU backend ran on host threads; `None` when there are none.
    pub host_xla_db: Option<OpMetricsDb>,
    /// Duty cycle (TPU): Σ active / Σ idle over chips, on the host clock.
    pub duty_busy_ps: u64,
    pub duty_idle_ps: u64,
    pub steps: StepDb,
    /// Our one-step-per-module inference (first device plane): (begin, duration, module).
    pub steps_inferred: Vec<(i64, u64, String)>,
    /// Program id → module name (`jit_f`), from the HLO the capture carries.
    pub program_names: BTreeMap<u64, String>,
    /// Host-plane counters some runtimes emit (`None` = absent).
    pub mxu_utilization_percent: Option<f64>,
    pub hbm_utilization_percent: Option<f64>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// GPU kernels whose HLO instruction was not found (XProf drops them too).
    pub gpu_kernels_without_hlo: u64,
    /// The capture has a host threads plane (`/host:CPU`): XProf's host database, and its
    /// IDLE op, exist only then.
    pub has_host_plane: bool,
}

/// SparseCore op databases by offload key (`offload_core_id`, `tc_offload_start_id`).
type SparseCoreDbs = HashMap<(u64, u64), OpMetricsDb>;

/// What [`build_with`] computes; the default is everything ([`build`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuildOptions {
    /// The step database and `steps_inferred`. `false` leaves them empty (`StepsSource::None`):
    /// for views that read no step (hlo_stats, op_profile, device information). On a CPU capture
    /// the step grouping walks every host-thread event.
    pub steps: bool,
    /// The host threads' framework-op database (`host_db`, which the overview reads). `false`
    /// leaves it empty.
    pub host_framework_ops: bool,
}

impl BuildOptions {
    /// The op databases, run and performance environment alone: what hlo_stats, op_profile,
    /// the top ops, the profile summary and device information read. Of the host threads it
    /// needs only the XLA ops a CPU backend ran there ([`HostEvents::XlaOps`]).
    pub const OP_DATABASES: BuildOptions = BuildOptions {
        steps: false,
        host_framework_ops: false,
    };

    /// The step database and the op databases, without the host framework ops: what the step
    /// trace and the roofline model read.
    pub const STEPS_AND_OP_DATABASES: BuildOptions = BuildOptions {
        steps: true,
        host_framework_ops: false,
    };

    /// The host-thread events a model must hold for this build (what to load).
    pub fn host_events(self) -> HostEvents {
        if self.steps || self.host_framework_ops {
            HostEvents::All
        } else {
            HostEvents::XlaOps
        }
    }
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            steps: true,
            host_framework_ops: true,
        }
    }
}

/// The accelerator planes the engine reads: the TPU TensorCore planes, else the GPU planes
/// (a capture with both is read as TPU).
pub fn device_planes(space: &HostSpace) -> (Vec<&Plane>, Vec<&Plane>) {
    let tpu: Vec<&Plane> = space
        .planes
        .iter()
        .filter(|p| is_tpu_tensor_core_plane(&p.name))
        .collect();
    let gpu: Vec<&Plane> = if tpu.is_empty() {
        space
            .planes
            .iter()
            .filter(|p| is_gpu_plane(&p.name))
            .collect()
    } else {
        Vec::new()
    };
    (tpu, gpu)
}

/// Build one host's OpStats. Device planes are processed in parallel.
pub fn build(space: &HostSpace) -> OpStats {
    build_with(space, BuildOptions::default())
}

/// [`build`], computing only what `opts` asks for.
pub fn build_with(space: &HostSpace, opts: BuildOptions) -> OpStats {
    // A model loaded for fewer host events cannot give what needs them all: building it
    // would answer from a fraction of the host threads.
    debug_assert!(
        space.host_events == HostEvents::All || opts.host_events() == space.host_events,
        "a build asking for {:?} on a model holding {:?}",
        opts.host_events(),
        space.host_events
    );
    let opts = if space.host_events == HostEvents::All {
        opts
    } else {
        BuildOptions::OP_DATABASES
    };
    let (tpu, gpu) = device_planes(space);
    let hardware_type = if !tpu.is_empty() {
        HardwareType::Tpu
    } else if !gpu.is_empty() {
        HardwareType::Gpu
    } else {
        HardwareType::CpuOnly
    };
    let devices: &[&Plane] = if !tpu.is_empty() { &tpu } else { &gpu };

    let mut device_db = OpMetricsDb::default();
    let mut duty_busy = 0;
    let mut duty_idle = 0;
    let mut dropped = 0u64;
    if hardware_type == HardwareType::Tpu {
        // SparseCore ops first: they become children of the TensorCore ops that offloaded them.
        let sc: Vec<&Plane> = space
            .planes
            .iter()
            .filter(|p| is_sparse_core_plane(&p.name))
            .collect();
        let sc_dbs: Vec<(SparseCoreDbs, DutyCycle, Option<u32>)> = sc
            .par_iter()
            .map(|p| (sparse_core_dbs(p), duty_cycle(p), local_chip_id(p)))
            .collect();
        let mut sc_map: SparseCoreDbs = HashMap::new();
        for (m, _, _) in &sc_dbs {
            for (k, db) in m {
                match sc_map.remove(k) {
                    Some(prev) => {
                        let mut c = DbCombiner::new();
                        c.combine(&prev, false);
                        c.combine(db, false);
                        sc_map.insert(*k, c.finish());
                    }
                    None => {
                        sc_map.insert(*k, db.clone());
                    }
                }
            }
        }
        let per_core: Vec<(OpMetricsDb, DutyCycle, Option<u32>)> = tpu
            .par_iter()
            .map(|p| {
                (
                    tensor_core_db_with(p, &sc_map),
                    duty_cycle(p),
                    local_chip_id(p),
                )
            })
            .collect();
        let mut c = DbCombiner::new();
        let mut duty = DutyCycleCombiner::default();
        for (db, dc, chip) in &per_core {
            c.combine(db, true);
            duty.add(dc, *chip);
        }
        // SparseCores count in the duty cycle too (a chip is busy when any of its cores is).
        for (_, dc, chip) in &sc_dbs {
            duty.add(dc, *chip);
        }
        duty_busy = duty.active_ps();
        duty_idle = duty.idle_ps();
        device_db = c.finish();
        crate::device::add_fusion_children(&mut device_db, &space.modules);
        device_db.busy_time_ps = duty_busy;
        device_db.idle_time_ps = duty_idle;
    } else if hardware_type == HardwareType::Gpu {
        let per_core: Vec<(OpMetricsDb, u64)> =
            gpu.par_iter().map(|p| gpu_db(p, &space.modules)).collect();
        let mut c = DbCombiner::new();
        for (db, d) in &per_core {
            c.combine(db, true);
            dropped = dropped.saturating_add(*d);
        }
        device_db = c.finish();
    }

    let host = space.plane(HOST_THREADS);
    // The three host-plane passes are independent: on a CPU capture each walks every event of
    // the host threads, so they run side by side.
    let ((host_db, host_xla_db), steps) = rayon::join(
        || {
            rayon::join(
                || {
                    host.filter(|_| opts.host_framework_ops)
                        .map(framework_op_db)
                        .unwrap_or_default()
                },
                || {
                    if hardware_type == HardwareType::CpuOnly {
                        host.and_then(|h| host_xla_op_db(h, &space.modules))
                    } else {
                        None
                    }
                },
            )
        },
        || {
            if opts.steps {
                step_db(&tpu, &gpu, host, space.skips_grouping)
            } else {
                StepDb::default()
            }
        },
    );
    if hardware_type == HardwareType::Gpu && opts.steps {
        device_db.precision_stats = crate::device::gpu_precision_stats(&gpu, &steps.kernel_groups);
    }
    let steps_inferred = if opts.steps && steps.source == StepsSource::None {
        infer_module_steps(devices.first().copied())
    } else {
        Vec::new()
    };
    let device_type = match hardware_type {
        HardwareType::CpuOnly => "CPU".to_string(),
        HardwareType::Gpu => gpu
            .first()
            .map(|p| gpu_model_name(p))
            .unwrap_or_else(|| "GPU".into()),
        // XProf leaves it empty when the TPU plane does not say.
        HardwareType::Tpu => devices
            .first()
            .and_then(|p| p.stats.str(StatKey::DeviceTypeString))
            .map(str::to_string)
            .unwrap_or_default(),
    };
    OpStats {
        run_env: RunEnvironment {
            hardware_type,
            device_type,
            device_core_count: devices.len() as u32,
            host_count: 1,
            task_count: 1,
            hostnames: vec![space.hostname.clone()],
            is_training: space.modules.values().any(|m| m.is_training),
        },
        perf_env: match hardware_type {
            HardwareType::Tpu => tpu.first().map(|p| perf_env(p)),
            HardwareType::Gpu => gpu.first().map(|p| gpu_perf_env(p)),
            HardwareType::CpuOnly => None,
        },
        device_db,
        host_db,
        host_xla_db,
        duty_busy_ps: duty_busy,
        duty_idle_ps: duty_idle,
        steps,
        steps_inferred,
        program_names: space
            .modules
            .values()
            .map(|m| (m.program_id, m.name.clone()))
            .collect(),
        mxu_utilization_percent: host
            .and_then(|h| h.stats.f64(StatKey::MatrixUnitUtilizationPercent)),
        hbm_utilization_percent: host.and_then(|h| h.stats.f64(StatKey::HbmUtilizationPercent)),
        errors: dedup(space.errors.clone()),
        warnings: dedup(space.warnings.clone()),
        gpu_kernels_without_hlo: dropped,
        has_host_plane: host.is_some(),
    }
}

fn dedup(mut v: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    v.retain(|s| seen.insert(s.clone()));
    v
}

/// Combine several hosts (spec §6): op databases merged, counts summed, steps kept only when
/// every host has them (step intersection), device type / peaks from the first host with a
/// device.
pub fn combine(mut hosts: Vec<OpStats>) -> Option<OpStats> {
    if hosts.len() <= 1 {
        return hosts.pop();
    }
    let mut dev = DbCombiner::new();
    let mut host = DbCombiner::new();
    let mut host_xla = DbCombiner::new();
    let mut any_host_xla = false;
    for h in &hosts {
        dev.combine(&h.device_db, true);
        host.combine(&h.host_db, false);
        if let Some(x) = &h.host_xla_db {
            host_xla.combine(x, true);
            any_host_xla = true;
        }
    }
    let first_dev = hosts
        .iter()
        .position(|h| h.run_env.hardware_type != HardwareType::CpuOnly)
        .unwrap_or(0);
    let mut out = hosts[first_dev].clone();
    out.device_db = dev.finish();
    out.host_db = host.finish();
    out.host_xla_db = any_host_xla.then(|| host_xla.finish());
    out.duty_busy_ps = hosts
        .iter()
        .map(|h| h.duty_busy_ps)
        .fold(0, |a, b| a.saturating_add(b));
    out.duty_idle_ps = hosts
        .iter()
        .map(|h| h.duty_idle_ps)
        .fold(0, |a, b| a.saturating_add(b));
    out.device_db.busy_time_ps = out.duty_busy_ps;
    out.device_db.idle_time_ps = out.duty_idle_ps;
    out.run_env.task_count = hosts
        .iter()
        .map(|h| h.run_env.task_count)
        .fold(0, |a, b| a.saturating_add(b));
    out.run_env.device_core_count = hosts
        .iter()
        .map(|h| h.run_env.device_core_count)
        .fold(0, |a, b| a.saturating_add(b));
    // XProf keeps the hostnames as a set and counts hosts by it: two captures from one
    // machine (two processes, or two runs copied side by side) are one host of two tasks.
    out.run_env.hostnames = dedup(
        hosts
            .iter()
            .flat_map(|h| h.run_env.hostnames.clone())
            .collect(),
    );
    out.run_env.host_count = u32::try_from(out.run_env.hostnames.len()).unwrap_or(u32::MAX);
    // XProf overwrites it with each host's in turn (`CombineRunEnvironment`): the last wins.
    out.run_env.is_training = hosts.last().is_some_and(|h| h.run_env.is_training);
    out.has_host_plane = hosts.iter().any(|h| h.has_host_plane);
    out.gpu_kernels_without_hlo = hosts
        .iter()
        .map(|h| h.gpu_kernels_without_hlo)
        .fold(0, |a, b| a.saturating_add(b));
    for h in &hosts {
        for (k, v) in &h.program_names {
            out.program_names.entry(*k).or_insert_with(|| v.clone());
        }
        out.errors.extend(h.errors.iter().cloned());
        out.warnings.extend(h.warnings.iter().cloned());
    }
    out.errors = dedup(std::mem::take(&mut out.errors));
    out.warnings = dedup(std::mem::take(&mut out.warnings));
    out.steps = combine_steps(&hosts);
    Some(out)
}

/// The hosts' steps as XProf combines them (`ComputeStepIntersectionToMergeOpStats`,
/// `CombineStepDatabase`): each worker host's steps are aligned in time with those of the host
/// whose steps span the least time (the chief), only the stretch every host covers is kept,
/// and its steps are numbered 0, 1, 2, … . A step's cores are those of every host, host `h`'s
/// core `c` as `h·1000 + c`. Hosts without a device do not take part when another host has
/// one (XProf's coordinators). A combined step is named as on the first worker host.
fn combine_steps(hosts: &[OpStats]) -> StepDb {
    let no_accelerator = hosts
        .iter()
        .all(|h| h.run_env.hardware_type == HardwareType::CpuOnly);
    let workers: Vec<(usize, &StepDb)> = hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| no_accelerator || h.run_env.hardware_type != HardwareType::CpuOnly)
        .map(|(i, h)| (i, &h.steps))
        .collect();
    let source = if workers.iter().any(|(_, s)| s.source == StepsSource::None) {
        StepsSource::None
    } else {
        workers.first().map_or(StepsSource::None, |(_, s)| s.source)
    };
    let complete: Vec<(usize, &[Step])> = workers
        .iter()
        .map(|(i, s)| (*i, s.complete_steps.as_slice()))
        .collect();
    let all: Vec<(usize, &[Step])> = workers
        .iter()
        .map(|(i, s)| (*i, s.steps.as_slice()))
        .collect();
    let (complete_steps, empty_intersect) = merge_aligned(&complete);
    // XProf's `hlo_metrics_db_complete_steps_only` of several hosts: the kept steps' ops.
    let steps_op_db = workers
        .iter()
        .any(|(_, s)| s.steps_op_db.is_some())
        .then(|| {
            let mut c = DbCombiner::new();
            for db in complete_steps.iter().filter_map(|s| s.op_db.as_ref()) {
                c.combine(db, true);
            }
            c.finish()
        });
    let steps = merge_aligned(&all).0;
    // No steps: the first worker's reason, else every host had steps, which do not meet.
    let no_steps = steps.is_empty().then(|| {
        workers
            .iter()
            .find_map(|(_, s)| s.no_steps)
            .unwrap_or(crate::steps::NoSteps::HostsDoNotMeet)
    });
    StepDb {
        source,
        steps_op_db,
        steps,
        complete_steps,
        empty_intersect,
        kernel_groups: Default::default(),
        no_steps,
    }
}

/// XProf `GlobalCoreId`: a host's cores kept apart in a combined step.
fn global_core_id(host: usize, core: i64) -> i64 {
    (host as i64).saturating_mul(1000).saturating_add(core)
}

/// The steps every host covers, aligned as in [`crate::intersect::StepIntersection`] and
/// merged, and whether the hosts' steps failed to meet.
fn merge_aligned(hosts: &[(usize, &[Step])]) -> (Vec<Step>, bool) {
    let spans: Vec<Vec<crate::intersect::Span>> = hosts
        .iter()
        .map(|(_, steps)| steps.iter().map(crate::intersect::step_span).collect())
        .collect();
    let Some(x) = crate::intersect::StepIntersection::new(&spans) else {
        return (Vec::new(), false);
    };
    let steps = (0..x.num_steps)
        .map(|k| {
            let mut step = Step {
                step_num: k as i64,
                name: String::new(),
                per_core: Default::default(),
                op_db: None,
            };
            let mut db: Option<DbCombiner> = None;
            for (pos, (host, steps)) in hosts.iter().enumerate() {
                let src = &steps[x.first_index[pos] + k];
                if step.name.is_empty() {
                    step.name = src.name.clone();
                }
                for (core, cs) in &src.per_core {
                    step.per_core
                        .insert(global_core_id(*host, *core), cs.clone());
                }
                if let Some(d) = &src.op_db {
                    db.get_or_insert_with(DbCombiner::new).combine(d, true);
                }
            }
            step.op_db = db.map(DbCombiner::finish);
            step
        })
        .collect();
    (steps, x.empty_intersect)
}
