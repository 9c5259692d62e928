use serde_json::{Map, Value, json};
use xprof_memory::profile::{self, AllocatorProfile};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::get_memory_viewer::{memory_error, no_data_with_capture};
use crate::common::{capture_error, session, with_capture};

pub struct GetMemoryProfile;
register_tool!(GetMemoryProfile);

fn allocator_json(a: &AllocatorProfile) -> Value {
    let s = &a.summary;
    let p = &s.peak_stats;
    let rows: Vec<Value> = a
        .active_allocations
        .iter()
        .map(|r| {
            let (m, t) = if r.snapshot_index >= 0 {
                let snap = &a.peak_snapshots[r.snapshot_index as usize];
                (&snap.meta, Some(snap.time_offset_ps))
            } else {
                (&a.special_allocations[r.special_index as usize], None)
            };
            json!({
                "tf_op_name": m.tf_op_name,
                "allocation_bytes": m.allocation_bytes,
                "requested_bytes": m.requested_bytes,
                "occurrences": r.num_occurrences,
                "region_type": m.region_type,
                "data_type": m.data_type,
                "shape": m.tensor_shape,
                "step_id": m.step_id,
                "time_offset_ps": t,
                "special": r.snapshot_index < 0,
            })
        })
        .collect();
    json!({
        "memory_id": a.memory_id,
        "num_events": a.snapshots.len(),
        "peak_bytes_in_use": p.peak_bytes_in_use,
        "stack_reserved_bytes": p.stack_reserved_bytes,
        "heap_allocated_bytes": p.heap_allocated_bytes,
        "free_memory_bytes": p.free_memory_bytes,
        "memory_capacity_bytes": s.memory_capacity,
        "fragmentation": p.fragmentation,
        "peak_time_offset_ps": s.peak_stats_time_ps,
        "peak_step_id": a.peak_step_id,
        "peak_bytes_usage_lifetime": s.peak_bytes_usage_lifetime,
        "active_allocations_at_peak": rows,
        // The sampled timeline (≤ 1000 points, max-box filtered as XProf samples it).
        "timeline": {
            "columns": ["time_offset_ps", "heap_allocated_bytes", "stack_reserved_bytes", "activity"],
            "rows": a.sampled_timeline.iter().map(|t| json!([
                t.time_offset_ps,
                t.stats.heap_allocated_bytes,
                t.stats.stack_reserved_bytes,
                t.meta.memory_activity.as_str(),
            ])).collect::<Vec<_>>(),
            "total_events": a.snapshots.len(),
            "sampled": a.sampled_timeline.len() < a.snapshots.len(),
        },
    })
}

impl Tool for GetMemoryProfile {
    fn name(&self) -> &'static str {
        "get_memory_profile"
    }
    fn summary(&self) -> &'static str {
        "Peak device memory, heap/stack split, fragmentation and the allocations live at the peak"
    }
    fn doc(&self) -> &'static str {
        "XProf's memory_profile view for one host (--host, else the first): the allocator \
         timeline from the MemoryAllocation/MemoryDeallocation events of its /host:CPU plane, \
         per allocator (memory id). Top-level GiB fields are the seed's (rounded; \
         utilization_percent is computed from the rounded GiB values, as the seed and XProf's \
         CLI print it); `peak` carries the exact byte counts. Among tied peaks the latest in \
         time is the peak. `memory_profile` is XProf's own JSON for the view. Captures without \
         allocator events (CPU-only JAX, most GPU runs without the BFC allocator's tracing) \
         answer no_data."
    }
    fn params(&self) -> Params {
        Params::new().capture().host().boolean(
            "xprof_json",
            "Include XProf's own JSON for the view as `memory_profile` (its timeline has up to \
             1000 points per allocator).",
            true,
        )
    }
    fn output(&self) -> &'static str {
        "{capture, run, host, memory_capacity_gib, peak_memory_usage_gib, peak_usage_details{…}, \
         peak{memory_id, peak_bytes_in_use, stack_reserved_bytes, heap_allocated_bytes, \
         free_memory_bytes, memory_capacity_bytes, fragmentation, peak_time_offset_ps, …}, \
         allocators[{…, active_allocations_at_peak, timeline{columns, rows}}], memory_ids, \
         memory_profile{XProf JSON}}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Peak HBM of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["peak_memory_usage_gib", "peak", "memory_profile"]),
            Example::new(
                "A CPU capture has no allocator events: no_data",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["status", "reason"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let with_json = call.bool_or("xprof_json", true)?;
        let s = session(call)?;
        let host_arg = call.opt_nonempty("host")?;
        let host = s
            .first_or_named(host_arg.as_deref())
            .map_err(capture_error)?;
        call.read_file(&host.path);
        let space =
            xprof_memory::open_xspace(&host.path, profile::wanted_plane).map_err(memory_error)?;
        let p = profile::build(&space);
        let used = [host];
        if !p.has_host_plane {
            return Ok(no_data_with_capture(
                &s,
                &used,
                format!(
                    "host {} has no /host:CPU plane, where allocator events are recorded",
                    host.name
                ),
                profile::CAPTURE_FLAGS,
            ));
        }
        let Some(peak) = p.peak_allocator() else {
            return Ok(no_data_with_capture(
                &s,
                &used,
                format!(
                    "no MemoryAllocation/MemoryDeallocation events on /host:CPU of host {}",
                    host.name
                ),
                profile::CAPTURE_FLAGS,
            ));
        };
        let capacity = p.max_capacity().unwrap_or(0);
        let ps = &peak.summary.peak_stats;
        let mut body = Map::new();
        body.insert("host".into(), json!(host.name));
        if let Some(Value::Object(seed)) = p.seed_summary() {
            body.extend(seed);
        }
        let mut exact = allocator_json(peak);
        exact["memory_capacity_bytes_max"] = json!(capacity);
        exact["utilization_percent_exact"] =
            if peak.summary.peak_present.free_memory && peak.summary.memory_capacity > 0 {
                json!(ps.peak_bytes_in_use as f64 / peak.summary.memory_capacity as f64 * 100.0)
            } else {
                Value::Null
            };
        exact["tie_rule"] = json!("among snapshots with equal peak usage, the latest in time");
        if let Some(rows) = exact.as_object_mut() {
            rows.remove("active_allocations_at_peak");
            rows.remove("timeline");
        }
        body.insert("peak".into(), exact);
        body.insert(
            "allocators".into(),
            Value::Array(p.allocators.values().map(allocator_json).collect()),
        );
        body.insert(
            "memory_ids".into(),
            json!(p.allocators.keys().collect::<Vec<_>>()),
        );
        body.insert("num_events".into(), json!(p.num_events));
        if with_json {
            body.insert("memory_profile".into(), p.to_xprof_json());
        }
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
