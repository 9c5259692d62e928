use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_pod_viewer::{no_data_with, views_error};
use crate::common::{capture_error, session, with_capture};

pub struct GetMegascaleStats;
register_tool!(GetMegascaleStats);

const DCN_FLAGS: &[&str] = &[
    "profile a multi-slice TPU job (DCN collectives between slices) with the MegaScale runtime's host traces on",
];

impl Tool for GetMegascaleStats {
    fn name(&self) -> &'static str {
        "get_megascale_stats"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["megascale_stats"]
    }
    fn summary(&self) -> &'static str {
        "DCN (multi-slice) collectives per rendezvous: slack, stalls, bytes, required bandwidth (XProf megascale_stats)"
    }
    fn doc(&self) -> &'static str {
        "XProf's megascale_stats (DCN slack analysis) of one host (--host, default the first, as \
         XProf reads one host): the send/recv/send-done/recv-done ops of TPU core 0 whose HLO \
         category is `host send`/`host recv`, matched to their HLO instructions (rendezvous and \
         transfer type from frontend attributes, channel ids, buffer sizes), summarised per \
         rendezvous: average slack, observed duration, per-op stalls, total stall, occurrences, \
         bytes over the network and the bandwidth needed to hide the transfer in the slack \
         (Gbps). XProf reads it only when `/host:CPU` has `MegaScale:` events; single-slice \
         captures answer `no_data`."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .integer_min("limit", "Maximum rows (0 = all).", Some(50), 0)
    }
    fn output(&self) -> &'static str {
        "{capture, run, presence: {has_megascale_host_events, has_tpu0, dcn_ops, dcn_ops_with_hlo}, table: {columns, total_records, truncated, records: [{rendezvous_name, recv_op_name, send_op_name, transfer_type, slack_time, host_stall, observed_duration, send_stall, send_done_stall, recv_stall (null, see recv_stall_reason), recv_stall_measured, recv_done_stall, stall_duration, total_stall, occurrences, net_tx_bytes, required_bandwidth}]}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "A single-slice TPU capture has no DCN collectives (no_data)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["status", "table"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let limit = call.usize_or("limit", 50)?;
        let s = session(call)?;
        let host = call.opt_nonempty("host")?;
        let h = s.first_or_named(host.as_deref()).map_err(capture_error)?;
        call.read_file(&h.path);
        for f in &s.hlo_protos {
            call.read_file(f);
        }
        let space = xprof_views::load::read_raw(&h.path, xprof_views::load::megascale_planes)
            .map_err(views_error)?;
        let ms = xprof_views::megascale::megascale_stats_with_hlo(&space, &s.hlo_protos);
        let p = &ms.presence;
        let used = [h];
        let mut body = Map::new();
        body.insert(
            "presence".into(),
            json!({
                "has_megascale_host_events": p.has_megascale_host_events,
                "has_tpu0": p.has_tpu0,
                "dcn_ops": p.dcn_ops,
                "dcn_ops_with_hlo": p.dcn_ops_with_hlo,
            }),
        );
        body.insert("table".into(), ms.table().to_json(limit));
        if ms.summaries.is_empty() {
            let reason = if !p.has_tpu0 {
                "no `/device:TPU:0` plane: the DCN analysis reads TPU core 0"
            } else if !p.has_megascale_host_events {
                "no `MegaScale:` events on `/host:CPU`: not a multi-slice (DCN) capture"
            } else if p.dcn_ops == 0 {
                "no `host send`/`host recv` ops inside an XLA module on TPU core 0"
            } else if p.dcn_ops_with_hlo == 0 {
                "the DCN ops' HLO instructions were not found (no embedded HLO and no *.hlo_proto.pb for their module)"
            } else {
                "no complete send … recv-done transfer (with a rendezvous name) on TPU core 0"
            };
            return Ok(no_data_with(&s, &used, &[], reason, DCN_FLAGS, body));
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
