use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};

pub struct GetDeviceInformation;
register_tool!(GetDeviceInformation);

impl Tool for GetDeviceInformation {
    fn name(&self) -> &'static str {
        "get_device_information"
    }
    fn summary(&self) -> &'static str {
        "Device peak FLOP rate, memory bandwidths and ridge points (roofline envelope)"
    }
    fn doc(&self) -> &'static str {
        "The roofline model's device envelope: peak FLOP rate (GFLOP/s), peak HBM / VMEM / CMEM \
         bandwidths (GiB/s) and the ridge points (FLOP/byte), from the first device plane's \
         stats. Full-precision numbers; `xprof_strings` holds XProf's 6-digit strings. A CPU-only \
         capture has no device: the answer is no_data."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, device_type, peak_flop_rate, peak_hbm_bw, …, hbm_ridge_point, …, units, xprof_strings}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Device envelope of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["device_type", "peak_flop_rate", "hbm_ridge_point"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        let Some(info) = xprof_opstats::views::device_information(&st) else {
            return Ok(ToolOutput::no_data(
                "the capture has no /device:TPU or /device:GPU plane (CPU-only), so there is no device envelope",
                &["profile on a TPU or GPU backend"],
            ));
        };
        let body: Map<String, serde_json::Value> = info.as_object().cloned().unwrap_or_default();
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}
