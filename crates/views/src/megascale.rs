//! megascale_stats (XProf `xspace_to_dcn_slack_analysis.cc`, `process_megascale_dcn.cc`): DCN
//! (multi-slice) transfers — the send/recv/send-done/recv-done ops of TPU core 0 whose HLO
//! category is `host send`/`host recv` — summarised per rendezvous: slack, stalls, observed
//! duration, bytes over the network and the bandwidth they require.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use serde_json::{Map, json};
use xprof_hlo::print::element_bits;
use xprof_proto::xla::{HloInstructionProto, HloModuleProto, ShapeProto};
use xprof_xspace::XSpace;

use crate::table::{Table, placeholder, safe_div};

pub const COLUMNS: &[&str] = &[
    "rendezvous_name",
    "recv_op_name",
    "send_op_name",
    "transfer_type",
    "slack_time",
    "host_stall",
    "observed_duration",
    "send_stall",
    "send_done_stall",
    "recv_stall",
    "recv_done_stall",
    "stall_duration",
    "total_stall",
    "occurrences",
    "net_tx_bytes",
    "required_bandwidth",
];

pub const REASON_RECV_STALL: &str = "XProf 2.24.2 divides the recv duration by 1e6 twice (µs/1e6) when summarising, so its value is 1e6× too small; *_measured is the recv duration in ms";

const RENDEZVOUS_ATTR: &str = "_xla_host_transfer_rendezvous";
const TRANSFER_TYPE_ATTR: &str = "_xla_megascale_transfer_type";

/// What gates and feeds the analysis, for "no data" answers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MegascalePresence {
    /// `/host:CPU` has `MegaScale:*` events (XProf's gate).
    pub has_megascale_host_events: bool,
    pub has_tpu0: bool,
    /// `host send`/`host recv` ops inside a module on TPU core 0.
    pub dcn_ops: usize,
    /// Of those, ops whose HLO instruction was found.
    pub dcn_ops_with_hlo: usize,
}

/// One (send … recv-done) instance.
#[derive(Clone, Debug, Default)]
struct Slack {
    rendezvous: String,
    transfer_type: String,
    send_start_us: f64,
    recv_done_end_us: f64,
    slack_us: f64,
    bytes: u64,
    stall_us: f64,
    recv_op: String,
    send_op: String,
    send_ps: u64,
    recv_ps: u64,
    send_done_ps: u64,
    recv_done_ps: u64,
}

/// Per-rendezvous summary (XProf `DcnSlackSummary`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlackSummary {
    pub rendezvous: String,
    pub recv_op_name: String,
    pub send_op_name: String,
    pub transfer_type: String,
    pub slack_us: f64,
    pub observed_duration_us: f64,
    pub send_duration_us: f64,
    pub send_done_duration_us: f64,
    /// The recv duration (µs), correct; XProf's own value is this / 1e6.
    pub recv_duration_us: f64,
    pub recv_done_duration_us: f64,
    pub stall_duration_us: f64,
    pub occurrences: u64,
    pub bytes_transmitted_over_network: u64,
}

#[derive(Clone, Debug, Default)]
pub struct MegascaleStats {
    pub summaries: Vec<SlackSummary>,
    pub presence: MegascalePresence,
}

impl MegascaleStats {
    /// XProf's DataTable, rows by rendezvous name (XProf's order is a hash map's).
    pub fn table(&self) -> Table {
        let mut t = Table::new(COLUMNS);
        let ms = |us: f64| us / 1000.0;
        for s in &self.summaries {
            let mut r = Map::new();
            r.insert("rendezvous_name".into(), json!(s.rendezvous));
            r.insert("recv_op_name".into(), json!(s.recv_op_name));
            r.insert("send_op_name".into(), json!(s.send_op_name));
            r.insert("transfer_type".into(), json!(s.transfer_type));
            r.insert("slack_time".into(), json!(ms(s.slack_us)));
            // Host stalls need the megascale host plane and topology, which XProf's converter
            // is not given either ("-").
            r.insert("host_stall".into(), json!("-"));
            r.insert(
                "observed_duration".into(),
                json!(ms(s.observed_duration_us)),
            );
            r.insert("send_stall".into(), json!(ms(s.send_duration_us)));
            r.insert("send_done_stall".into(), json!(ms(s.send_done_duration_us)));
            placeholder(
                &mut r,
                "recv_stall",
                REASON_RECV_STALL,
                Some(json!(ms(s.recv_duration_us))),
            );
            r.insert(
                "recv_stall_xprof".into(),
                json!(ms(s.recv_duration_us / 1e6)),
            );
            r.insert("recv_done_stall".into(), json!(ms(s.recv_done_duration_us)));
            r.insert("stall_duration".into(), json!(ms(s.stall_duration_us)));
            r.insert(
                "total_stall".into(),
                json!(ms(s.stall_duration_us * s.occurrences as f64)),
            );
            r.insert("occurrences".into(), json!(s.occurrences));
            r.insert(
                "net_tx_bytes".into(),
                json!(s.bytes_transmitted_over_network),
            );
            r.insert(
                "required_bandwidth".into(),
                if s.slack_us == 0.0 {
                    json!(i32::MAX)
                } else {
                    json!(safe_div(s.bytes_transmitted_over_network as f64, s.slack_us) * 8e-3)
                },
            );
            t.records.push(r);
        }
        t
    }
}

/// An HLO instruction as the DCN analysis needs it.
#[derive(Clone, Debug)]
struct InstrMeta {
    opcode: String,
    channel_id: i64,
    rendezvous: Option<String>,
    transfer_type: Option<String>,
    size: u64,
}

fn is_tuple(s: &ShapeProto) -> bool {
    s.element_type == xprof_proto::xla::PrimitiveType::Tuple as i32
}

/// `ShapeUtil::ByteSizeOfElements` of an array.
fn array_bytes(s: &ShapeProto) -> u64 {
    let n: u64 = s.dimensions.iter().map(|d| (*d).max(0) as u64).product();
    (n * element_bits(s.element_type)).div_ceil(8)
}

/// `ShapeUtil::ByteSizeOf` (tuples are tables of 8-byte pointers).
fn byte_size_of(s: &ShapeProto) -> u64 {
    if is_tuple(s) {
        8 * s.tuple_shapes.len() as u64
    } else {
        array_bytes(s)
    }
}

fn instr_meta(i: &HloInstructionProto) -> InstrMeta {
    let attr = |k: &str| {
        i.frontend_attributes
            .as_ref()
            .and_then(|f| f.map.get(k).cloned())
    };
    let size = match &i.shape {
        Some(s) if is_tuple(s) => s.tuple_shapes.iter().map(byte_size_of).sum(),
        Some(s) => array_bytes(s),
        None => 0,
    };
    InstrMeta {
        opcode: i.opcode.clone(),
        channel_id: i.channel_id,
        rendezvous: attr(RENDEZVOUS_ATTR),
        transfer_type: attr(TRANSFER_TYPE_ATTR),
        size,
    }
}

/// Module name (and `name(program_id)`) → instruction name → metadata.
type ModuleIndex = HashMap<String, std::sync::Arc<HashMap<String, InstrMeta>>>;

fn index_modules(modules: &[(Option<u64>, HloModuleProto)]) -> ModuleIndex {
    let mut out = ModuleIndex::new();
    for (pid, m) in modules {
        let instrs: HashMap<String, InstrMeta> = m
            .computations
            .iter()
            .flat_map(|c| c.instructions.iter())
            .map(|i| (i.name.clone(), instr_meta(i)))
            .collect();
        let instrs = std::sync::Arc::new(instrs);
        out.insert(m.name.clone(), instrs.clone());
        let id = pid.unwrap_or(m.id as u64);
        out.insert(format!("{}({id})", m.name), instrs);
    }
    out
}

/// HLO modules embedded in `/host:metadata` (stat `Hlo Proto`), with their program ids. Only
/// the modules are decoded: no reader of these looks at the buffer assignment.
pub fn embedded_hlo(space: &XSpace) -> Vec<(Option<u64>, HloModuleProto)> {
    xprof_xspace::hlo::embedded_hlo_modules(space)
        .into_iter()
        .filter_map(|m| Some((Some(m.program_id), m.decode_module().ok()??)))
        .collect()
}

/// HLO modules from `<module>(<program_id>).hlo_proto.pb` files (unreadable ones skipped).
pub fn file_hlo(files: &[PathBuf]) -> Vec<(Option<u64>, HloModuleProto)> {
    files
        .iter()
        .filter_map(|f| {
            let pid = xprof_opstats::load::program_id_from_file_name(f);
            let b = xprof_xspace::file::read(f).ok()?;
            Some((pid, xprof_proto::decode_hlo_module(&b).ok()??))
        })
        .collect()
}

#[derive(Default)]
struct OpState {
    start_ns: i64,
    transfer_type: String,
    overlapping_ns: i64,
    stall_ns: i64,
    send_op: String,
    send_ps: u64,
    recv_ps: u64,
    send_done_ps: u64,
    group_size: u64,
}

/// DCN collective info (`plugin/xprof/protobuf/dcn_collective_info.proto`), only the group
/// shapes the byte count needs.
#[derive(Clone, PartialEq, prost::Message)]
struct DcnCollectiveInfo {
    #[prost(int32, tag = "1")]
    transfer_type: i32,
    #[prost(message, repeated, tag = "2")]
    endpoint_groups: Vec<EndpointGroup>,
    #[prost(bytes = "vec", repeated, tag = "3")]
    one_to_one_groups: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct EndpointGroup {
    #[prost(bytes = "vec", repeated, tag = "1")]
    endpoints: Vec<Vec<u8>>,
}

/// XProf `ComputeTransmittedDataSize` (doubles truncated as XProf stores them in a uint64).
pub fn transmitted_bytes(size: u64, group: u64, transfer_type: &str) -> u64 {
    if group == 0 {
        return 0;
    }
    let (s, g) = (size as f64, group as f64);
    match transfer_type {
        "ONE_TO_ONE" => group.saturating_mul(size),
        "ALL_GATHER" => safe_div((g - 1.0) * s, g) as u64,
        "ALL_REDUCE" => (2.0 * safe_div(g - 1.0, g) * s) as u64,
        "ALL_TO_ALL" => (safe_div(g - 1.0, g) * s) as u64,
        "REDUCE_SCATTER" => size.saturating_mul(group - 1),
        _ => 0,
    }
}

/// The analysis of one host's XSpace (XProf reads one host; `hlo_files` are the run's
/// `*.hlo_proto.pb`).
pub fn megascale_stats_with_hlo(space: &XSpace, hlo_files: &[PathBuf]) -> MegascaleStats {
    let mut out = MegascaleStats::default();
    out.presence.has_megascale_host_events =
        space.planes().filter(|p| p.name() == "/host:CPU").any(|p| {
            p.event_metadata_iter()
                .any(|m| m.name().starts_with("MegaScale:"))
        });
    let Some(tpu0) = space.plane("/device:TPU:0") else {
        return out;
    };
    out.presence.has_tpu0 = true;
    if !out.presence.has_megascale_host_events {
        return out;
    }
    let mut hlo = embedded_hlo(space);
    hlo.extend(file_hlo(hlo_files));
    let modules = index_modules(&hlo);
    // Module spans (ps) on the module line, sorted, for the containing-module lookup.
    let mut mods: Vec<(i64, i64, &str)> = tpu0
        .lines()
        .filter(|l| l.name() == "XLA Modules")
        .flat_map(|l| l.events().map(|e| (e.start_ps(), e.end_ps(), e.name())))
        .collect();
    mods.sort();
    let mut slacks: Vec<Slack> = Vec::new();
    let mut channel_rendezvous: HashMap<i64, String> = HashMap::new();
    let mut states: BTreeMap<String, OpState> = BTreeMap::new();
    let mut group_sizes: HashMap<String, u64> = HashMap::new();
    for line in tpu0.lines().filter(|l| l.name() == "XLA Ops") {
        for e in line.events() {
            let cat = e
                .metadata_stat("hlo_category")
                .and_then(|s| s.str())
                .unwrap_or("");
            let (b, end) = (e.start_ps(), e.end_ps());
            let i = mods.partition_point(|m| m.0 <= b);
            let Some(module) = i.checked_sub(1).map(|i| &mods[i]).filter(|m| m.1 >= end) else {
                continue;
            };
            if !(cat.contains("host send") || cat.contains("host recv")) {
                continue;
            }
            out.presence.dcn_ops += 1;
            let display = e.display_name();
            let Some(instr) = modules.get(module.2).and_then(|m| m.get(display)) else {
                continue;
            };
            out.presence.dcn_ops_with_hlo += 1;
            // XProf `DcnTracker::VisitOp`.
            let rendezvous = match &instr.rendezvous {
                Some(r) => {
                    channel_rendezvous.insert(instr.channel_id, r.clone());
                    r.clone()
                }
                None => match channel_rendezvous.get(&instr.channel_id) {
                    Some(r) => r.clone(),
                    None => continue,
                },
            };
            let dur_ns = e.duration_ps() / 1000;
            // XProf's TimestampNs: the line's ns plus the offset truncated to ns.
            let t_ns = line.timestamp_ns().saturating_add(e.offset_ps() / 1000);
            let dur_ps = e.duration_ps().max(0) as u64;
            let st = states.entry(rendezvous.clone()).or_default();
            st.stall_ns = st.stall_ns.saturating_add(dur_ns);
            match instr.opcode.as_str() {
                "send" => {
                    st.start_ns = t_ns;
                    st.transfer_type = instr.transfer_type.clone().unwrap_or_default();
                    st.overlapping_ns = 0;
                    st.stall_ns = dur_ns;
                    st.send_op = display.to_string();
                    st.send_ps = dur_ps;
                    st.group_size = *group_sizes.entry(rendezvous.clone()).or_insert_with(|| {
                        use prost::Message;
                        let info = e
                            .metadata_stat("dcn_collective_info")
                            .and_then(|s| s.bytes())
                            .and_then(|b| DcnCollectiveInfo::decode(b).ok())
                            .unwrap_or_default();
                        if !info.one_to_one_groups.is_empty() {
                            1
                        } else if let Some(g) = info.endpoint_groups.first() {
                            g.endpoints.len() as u64
                        } else {
                            0
                        }
                    });
                }
                "recv" => st.recv_ps = dur_ps,
                "send-done" => st.send_done_ps = dur_ps,
                "recv-done" if st.start_ns != 0 => {
                    slacks.push(Slack {
                        rendezvous: rendezvous.clone(),
                        transfer_type: st.transfer_type.clone(),
                        send_start_us: st.start_ns as f64 / 1000.0,
                        recv_done_end_us: t_ns.saturating_add(dur_ns) as f64 / 1000.0,
                        slack_us: t_ns
                            .saturating_sub(st.start_ns)
                            .saturating_sub(st.overlapping_ns)
                            as f64
                            / 1000.0,
                        bytes: transmitted_bytes(instr.size, st.group_size, &st.transfer_type),
                        stall_us: st.stall_ns as f64 / 1000.0,
                        recv_op: display.to_string(),
                        send_op: st.send_op.clone(),
                        send_ps: st.send_ps,
                        recv_ps: st.recv_ps,
                        send_done_ps: st.send_done_ps,
                        recv_done_ps: dur_ps,
                    });
                }
                _ => {}
            }
            // Every DCN op overlaps every open transfer.
            for s in states.values_mut() {
                s.overlapping_ns = s.overlapping_ns.saturating_add(dur_ns);
            }
        }
    }
    // XProf `SummarizeDcnSlackAnalysis`.
    let mut by: BTreeMap<String, SlackSummary> = BTreeMap::new();
    for a in &slacks {
        let s = by.entry(a.rendezvous.clone()).or_default();
        s.slack_us += a.slack_us;
        s.occurrences += 1;
        s.rendezvous = a.rendezvous.clone();
        s.transfer_type = a.transfer_type.clone();
        s.bytes_transmitted_over_network = a.bytes;
        s.stall_duration_us += a.stall_us;
        s.observed_duration_us += a.recv_done_end_us - a.send_start_us;
        s.recv_op_name = a.recv_op.clone();
        s.send_op_name = a.send_op.clone();
        s.send_duration_us += a.send_ps as f64 / 1e6;
        s.recv_duration_us += a.recv_ps as f64 / 1e6;
        s.send_done_duration_us += a.send_done_ps as f64 / 1e6;
        s.recv_done_duration_us += a.recv_done_ps as f64 / 1e6;
    }
    for s in by.values_mut() {
        let n = s.occurrences as f64;
        s.slack_us = safe_div(s.slack_us, n);
        s.stall_duration_us = safe_div(s.stall_duration_us, n);
        s.observed_duration_us = safe_div(s.observed_duration_us, n);
        s.send_done_duration_us = safe_div(s.send_done_duration_us, n);
        s.recv_done_duration_us = safe_div(s.recv_done_duration_us, n);
        s.send_duration_us = safe_div(s.send_duration_us, n);
        s.recv_duration_us = safe_div(s.recv_duration_us, n);
    }
    out.summaries = by.into_values().collect();
    out
}

/// The analysis with only the HLO the XSpace embeds.
pub fn megascale_stats(space: &XSpace) -> MegascaleStats {
    megascale_stats_with_hlo(space, &[])
}
