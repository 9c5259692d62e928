//! What XProf's preprocessing changes in a capture before it groups steps
//! (`PreprocessXPlane`'s event mutators), for the events it names:
//!
//! * **Step roots.** TensorFlow Serving's and Orbax's batches (`BatchingSessionRun`,
//!   `ProcessBatch`, `OrbaxServing::ProcessBatch`) get a fixed root level (`_r`) whatever they
//!   carry, and a `TraceContext` gets level 1 unless it has a `_r` of its own.
//! * **Flows.** TPU runtimes record a program launch on the host and its execution on the
//!   device with matching ids (`run_id`, `queue_id`, …) but no flow stats; XProf turns those
//!   ids into producer (`_pt`, `_p`) and consumer (`_ct`, `_c`) contexts. Through them a
//!   device's `XLA Modules` events join the host step that launched them; TF runtime requests
//!   and legacy executor ops join the step that queued them the same way.
//!
//! The adapters apply [`Preprocess`] while converting events: the few events it names get the
//! stats XProf gives them ([`Preprocess::edit`], replacing any of the same keys), nothing else
//! changes. The context ids are ours (XProf hashes with absl): only which events share one
//! matters.
//!
//! Not reproduced: the thread-pool regions (`ThreadpoolListener::Region`), which XProf 2.24.2
//! adds but never groups (checked with its converters).

use std::hash::{Hash, Hasher};

use crate::device::{XLA_MODULES, is_tpu_tensor_core_plane};
use crate::model::{StatKey, StatValue};

/// XProf's `ContextType` values of the contexts made here.
const LEGACY: u64 = 1;
const TPU_STREAM: u64 = 11;
const TPU_LAUNCH: u64 = 12;

/// `run_id`s of host launch events are cut to their 27 low bits first (XProf's
/// `HostRunIdMutator`); the device records them that way.
const RUN_ID_MASK: u64 = (1 << 27) - 1;

/// The stats the edits are made of, as indices into [`Values`].
#[derive(Clone, Copy)]
enum Slot {
    IsRoot,
    DeviceOrdinal,
    QueueId,
    RunId,
    CoreType,
    StepId,
    IterNum,
    RequestId,
    QueueAddr,
}

const SLOTS: usize = 9;

/// A stat's slot by its name (XProf's `StatType` names).
fn slot_of(name: &str) -> Option<Slot> {
    Some(match name {
        "_r" => Slot::IsRoot,
        "device_ordinal" => Slot::DeviceOrdinal,
        "queue_id" => Slot::QueueId,
        "run_id" => Slot::RunId,
        "core_type" => Slot::CoreType,
        // `kStepId` is named "id".
        "id" => Slot::StepId,
        "iter_num" => Slot::IterNum,
        "request_id" => Slot::RequestId,
        "queue_addr" => Slot::QueueAddr,
        _ => None?,
    })
}

/// What the preprocessing makes of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// A step root at `level`; `replaces`: also when the event has a `_r` of its own
    /// (`XplaneRootEventMutatorFactory`, which XProf 2.24.2 applies to the batches).
    Root {
        level: i64,
        replaces: bool,
    },
    /// `EnqueueRequestLocked` → the request it queued (`request_id`, `queue_addr`).
    QueueProducer,
    QueueConsumer,
    /// `DoEnqueueProgram` → `CompleteCallbacks` (`device_ordinal`, `queue_id`, `run_id`,
    /// `core_type` or 0).
    LaunchProducer,
    LaunchConsumer,
    /// A TPU core's `XLA Modules` event: the launch it executes (the plane's ordinal, its
    /// `queue_id`, `run_id`, `core_type` or 0).
    Module,
    /// TensorFlow's `ExecutorState::Process` → `TpuExecuteOp` (`id`, `iter_num`).
    LegacyProducer,
    LegacyConsumer,
}

/// The rule for events of this name on a host or non-module line. The root names are those
/// XProf 2.24.2 makes steps of without a `_r` (checked with its converters; `SessionRun`,
/// `FunctionRun`, `RunGraph`, `BrainSessionRun`, `ServingModelRun` are none).
fn rule_of(name: &str) -> Option<Rule> {
    Some(match name {
        "ProcessBatch" | "OrbaxServing::ProcessBatch" => Rule::Root {
            level: 2,
            replaces: true,
        },
        "BatchingSessionRun" => Rule::Root {
            level: 1,
            replaces: true,
        },
        "TraceContext" => Rule::Root {
            level: 1,
            replaces: false,
        },
        "EnqueueRequestLocked" => Rule::QueueProducer,
        "RunProgramRequest"
        | "HostCallbackRequest"
        | "TransferH2DRequest"
        | "TransferPreprocessedH2DRequest"
        | "TransferD2HRequest"
        | "OnDeviceSendRequest"
        | "OnDeviceRecvRequest"
        | "OnDeviceSendRecvLocalRequest"
        | "CustomWait"
        | "OnDeviceSendRequestMulti"
        | "OnDeviceRecvRequestMulti"
        | "PjrtAsyncWait" => Rule::QueueConsumer,
        "DoEnqueueProgram" => Rule::LaunchProducer,
        "CompleteCallbacks" => Rule::LaunchConsumer,
        "ExecutorState::Process" => Rule::LegacyProducer,
        "TpuExecuteOp" => Rule::LegacyConsumer,
        _ => None?,
    })
}

/// The device ordinal of a TPU core plane (`/device:TPU:<n>`), whose `XLA Modules` XProf
/// connects to their launches.
fn tpu_core_ordinal(plane: &str) -> Option<u64> {
    if !is_tpu_tensor_core_plane(plane) {
        return None;
    }
    plane.strip_prefix("/device:TPU:")?.parse().ok()
}

/// A context id from the stats that make it (and a tag telling the kinds of context apart).
fn context_id(tag: u64, values: &[u64]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    tag.hash(&mut h);
    values.hash(&mut h);
    h.finish()
}

/// The values of an event's stats that a context can be made of.
#[derive(Default)]
pub(crate) struct Values([Option<u64>; SLOTS]);

impl Values {
    fn get(&self, s: Slot) -> Option<u64> {
        self.0[s as usize]
    }
}

/// The stats an edit gives an event, replacing any it has under the same keys.
pub(crate) type Edit = Vec<(StatKey, StatValue)>;

/// One plane's preprocessing: which event metadata (by position) and lines it edits, and
/// which of the plane's stat ids feed the edits.
pub(crate) struct Preprocess {
    /// Per event-metadata position, its rule.
    rules: Vec<Option<Rule>>,
    /// Stat metadata id → slot.
    slots: Vec<(i64, Slot)>,
    /// The plane's device ordinal, when its `XLA Modules` line gets contexts.
    ordinal: Option<u64>,
}

impl Preprocess {
    /// The plane's preprocessing, `None` when it edits no event (most planes).
    /// `metadata`: event metadata names by position; `stats`: (id, name) of its stat metadata.
    pub(crate) fn of<'a>(
        plane: &str,
        metadata: impl Iterator<Item = &'a str>,
        stats: impl Iterator<Item = (i64, &'a str)>,
    ) -> Option<Preprocess> {
        let slots: Vec<(i64, Slot)> = stats
            .filter_map(|(id, n)| slot_of(n).map(|s| (id, s)))
            .collect();
        let rules: Vec<Option<Rule>> = metadata.map(rule_of).collect();
        let ordinal = tpu_core_ordinal(plane);
        // A flow needs stats to be made of (other than `_r`, which only roots read); a root
        // does not.
        let flow_stats = slots.iter().any(|(_, s)| !matches!(s, Slot::IsRoot));
        let flows = flow_stats && (ordinal.is_some() || rules.iter().any(Option::is_some));
        let roots = rules.iter().any(|r| matches!(r, Some(Rule::Root { .. })));
        (flows || roots).then_some(Preprocess {
            rules,
            slots,
            ordinal,
        })
    }

    /// Whether a line's events are a TPU core's modules, which all get [`Rule::Module`].
    pub(crate) fn module_line(&self, line: &str) -> bool {
        self.ordinal.is_some() && line == XLA_MODULES
    }

    /// The rule for an event of this metadata position, on a [`Self::module_line`] or not
    /// (`None`: the event is converted as it is).
    pub(crate) fn rule(&self, module_line: bool, metadata_position: Option<usize>) -> Option<Rule> {
        if module_line {
            return Some(Rule::Module);
        }
        self.rules.get(metadata_position?).copied().flatten()
    }

    /// The values of an event's integer stats, given as (stat metadata id, value), that a
    /// context can be made of.
    pub(crate) fn values(&self, stats: impl Iterator<Item = (i64, u64)>) -> Values {
        let mut v = Values::default();
        for (id, value) in stats {
            if let Some(&(_, slot)) = self.slots.iter().find(|(sid, _)| *sid == id) {
                v.0[slot as usize] = Some(value);
            }
        }
        v
    }

    /// The stats `rule` gives an event with these stat values, `None` when it leaves the
    /// event as it is (a stat a flow is made of is missing, or a `TraceContext` has its own
    /// `_r`).
    pub(crate) fn edit(&self, rule: Rule, v: &Values) -> Option<Edit> {
        use Slot::*;
        let core_type = v.get(CoreType).unwrap_or(0);
        let launch = |ordinal: u64, run_id: u64| -> Option<u64> {
            Some(context_id(
                TPU_LAUNCH,
                &[ordinal, v.get(QueueId)?, run_id, core_type],
            ))
        };
        let (producer, kind, id) = match rule {
            Rule::Root { level, replaces } => {
                return (replaces || v.get(IsRoot).is_none())
                    .then(|| vec![(StatKey::IsRoot, StatValue::Int(level))]);
            }
            Rule::QueueProducer | Rule::QueueConsumer => (
                rule == Rule::QueueProducer,
                TPU_STREAM,
                context_id(TPU_STREAM, &[v.get(RequestId)?, v.get(QueueAddr)?]),
            ),
            Rule::LaunchProducer | Rule::LaunchConsumer => (
                rule == Rule::LaunchProducer,
                TPU_LAUNCH,
                launch(v.get(DeviceOrdinal)?, v.get(RunId)? & RUN_ID_MASK)?,
            ),
            Rule::Module => (false, TPU_LAUNCH, launch(self.ordinal?, v.get(RunId)?)?),
            Rule::LegacyProducer | Rule::LegacyConsumer => (
                rule == Rule::LegacyProducer,
                LEGACY,
                context_id(LEGACY, &[v.get(StepId)?, v.get(IterNum)?]),
            ),
        };
        let (kind_key, id_key) = if producer {
            (StatKey::ProducerType, StatKey::ProducerId)
        } else {
            (StatKey::ConsumerType, StatKey::ConsumerId)
        };
        Some(vec![
            (kind_key, StatValue::Uint(kind)),
            (id_key, StatValue::Uint(id)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(pairs: &[(Slot, u64)]) -> Values {
        let mut v = Values::default();
        for &(s, x) in pairs {
            v.0[s as usize] = Some(x);
        }
        v
    }

    /// (producer, context type, context id) of a flow edit.
    fn context(edit: Edit) -> (bool, u64, u64) {
        let num = |v: &StatValue| match v {
            StatValue::Uint(u) => *u,
            other => panic!("{other:?}"),
        };
        match edit.as_slice() {
            [(StatKey::ProducerType, k), (StatKey::ProducerId, i)] => (true, num(k), num(i)),
            [(StatKey::ConsumerType, k), (StatKey::ConsumerId, i)] => (false, num(k), num(i)),
            other => panic!("not a context: {other:?}"),
        }
    }

    #[test]
    fn a_launch_and_its_module_share_a_context_once_the_host_run_id_is_cut() {
        let host = Preprocess::of(
            "/host:CPU",
            ["DoEnqueueProgram", "CompleteCallbacks", "other"].into_iter(),
            [(1, "run_id"), (2, "queue_id"), (3, "device_ordinal")].into_iter(),
        )
        .unwrap();
        assert_eq!(host.rule(false, Some(0)), Some(Rule::LaunchProducer));
        assert_eq!(host.rule(false, Some(1)), Some(Rule::LaunchConsumer));
        assert_eq!(host.rule(false, Some(2)), None);
        assert!(!host.module_line("XLA Modules"));
        let device = Preprocess::of(
            "/device:TPU:3",
            ["jit_f(1)"].into_iter(),
            [(7, "run_id"), (8, "queue_id")].into_iter(),
        )
        .unwrap();
        assert!(device.module_line("XLA Modules") && !device.module_line("XLA Ops"));
        assert_eq!(device.rule(true, Some(0)), Some(Rule::Module));
        assert_eq!(device.rule(false, Some(0)), None);
        use Slot::*;
        let run = 5 + (1 << 27);
        let p = context(
            host.edit(
                Rule::LaunchProducer,
                &values(&[(DeviceOrdinal, 3), (QueueId, 1), (RunId, run)]),
            )
            .unwrap(),
        );
        let m = context(
            device
                .edit(Rule::Module, &values(&[(QueueId, 1), (RunId, 5)]))
                .unwrap(),
        );
        assert!(p.0 && !m.0);
        assert_eq!((p.1, p.2), (m.1, m.2));
        // Another core, queue or core type is another launch.
        let other = context(
            device
                .edit(
                    Rule::Module,
                    &values(&[(QueueId, 1), (RunId, 5), (CoreType, 1)]),
                )
                .unwrap(),
        );
        assert_ne!(other.2, m.2);
        // A missing stat: no context.
        assert_eq!(
            host.edit(Rule::LaunchProducer, &values(&[(RunId, 5)])),
            None
        );
    }

    #[test]
    fn batches_are_roots_whatever_they_carry_and_a_trace_context_unless_it_says_otherwise() {
        // Roots need no stat metadata at all.
        let host = Preprocess::of(
            "/host:CPU",
            ["ProcessBatch", "TraceContext", "BatchingSessionRun"].into_iter(),
            [].into_iter(),
        )
        .unwrap();
        let root = |level| Some(vec![(StatKey::IsRoot, StatValue::Int(level))]);
        let (batch, trace, session) = (
            host.rule(false, Some(0)).unwrap(),
            host.rule(false, Some(1)).unwrap(),
            host.rule(false, Some(2)).unwrap(),
        );
        let own_r = values(&[(Slot::IsRoot, 0)]);
        assert_eq!(host.edit(batch, &Values::default()), root(2));
        assert_eq!(host.edit(batch, &own_r), root(2));
        assert_eq!(host.edit(session, &own_r), root(1));
        assert_eq!(host.edit(trace, &Values::default()), root(1));
        assert_eq!(host.edit(trace, &own_r), None);
    }

    #[test]
    fn planes_without_launch_events_or_stats_need_no_preprocessing() {
        assert!(
            Preprocess::of(
                "/host:CPU",
                ["train"].into_iter(),
                [(1, "run_id")].into_iter()
            )
            .is_none()
        );
        assert!(
            Preprocess::of(
                "/host:CPU",
                ["DoEnqueueProgram"].into_iter(),
                [(1, "_r")].into_iter()
            )
            .is_none()
        );
        assert!(
            Preprocess::of(
                "/device:TPU:0 SparseCore 1",
                [].into_iter(),
                [(1, "run_id")].into_iter()
            )
            .is_none()
        );
        assert_eq!(tpu_core_ordinal("/device:TPU:12"), Some(12));
        assert_eq!(tpu_core_ordinal("/device:TPU:"), None);
    }
}
