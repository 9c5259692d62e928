//! The memory views on synthetic inputs whose answers are computed by hand.

use xprof_memory::{peak, profile, reshapes, viewer};
use xprof_proto::xla::heap_simulator_trace::{Event as HeapEvent, event::Kind};
use xprof_proto::xla::{
    BufferAllocationProto, BufferAssignmentProto, HeapSimulatorTrace, HloComputationProto,
    HloInstructionProto, HloModuleProto, HloProto, LogicalBufferProto, OpMetadata, ShapeProto,
    buffer_allocation_proto::Assigned, logical_buffer_proto::Location,
};
use xprof_testkit::{LineBuilder, Ref, XSpaceBuilder};
use xprof_xspace::XSpace;

/// An allocator event of allocator `GPU_0_bfc` with a 10 000-byte pool and a 100-byte stack.
fn alloc_event(
    l: LineBuilder,
    name: &str,
    t: i64,
    addr: i64,
    bytes: i64,
    heap: i64,
    frag: f64,
) -> LineBuilder {
    l.event(name, t, 0)
        .stat("allocator_name", Ref("GPU_0_bfc"))
        .stat("addr", addr)
        .stat("allocation_bytes", bytes)
        .stat("requested_bytes", bytes)
        .stat("bytes_allocated", heap)
        .stat("bytes_reserved", 100i64)
        .stat("bytes_available", 10_000 - 100 - heap)
        .stat("fragmentation", frag)
        .stat("peak_bytes_in_use", heap.max(3500))
        .stat("group_id", 0i64)
        .stat("tf_op", Ref(format!("op@{addr}")))
        .stat("data_type", 1i64)
        .stat("shape", "f32[8]")
}

fn allocator_capture() -> Vec<u8> {
    XSpaceBuilder::new()
        .hostname("h")
        .plane("/host:CPU", |p| {
            // Two threads: visit order (line A, then line B) differs from time order.
            p.line_with_id(1, "main/1", |l| {
                let l = alloc_event(l, "MemoryAllocation", 100, 0x1000, 1000, 1000, 0.1);
                let l = alloc_event(l, "MemoryAllocation", 200, 0x2000, 2000, 3000, 0.2);
                let l = alloc_event(l, "MemoryDeallocation", 300, 0x1000, 1000, 2500, 0.05);
                l.event("SomethingElse", 350, 10)
            })
            .line_with_id(2, "main/2", |l| {
                let l = alloc_event(l, "MemoryAllocation", 250, 0x3000, 500, 3500, 0.3);
                let l = alloc_event(l, "MemoryAllocation", 400, 0x4000, 1000, 3500, 0.25);
                // A second allocator, named by index_on_host.
                l.event("MemoryAllocation", 500, 0)
                    .stat("index_on_host", 1i64)
                    .stat("addr", 0x10i64)
                    .stat("allocation_bytes", 64i64)
                    .stat("bytes_allocated", 64i64)
                    .stat("bytes_available", 936i64)
            })
        })
        .plane("/device:TPU:0", |p| {
            p.line("XLA Modules", |l| {
                l.event("jit_f(1)", 1_000, 500)
                    .event("jit_f(1)", 3_000, 700)
            })
        })
        .to_bytes()
}

#[test]
fn memory_profile_peak_equals_hand_computation() {
    let space = XSpace::from_bytes(allocator_capture()).unwrap();
    let p = profile::build(&space);
    assert!(p.has_host_plane);
    assert_eq!(p.num_events, 6);
    let ids: Vec<&String> = p.allocators.keys().collect();
    assert_eq!(ids, ["1", "GPU_0_bfc"]);

    let a = p.peak_allocator().unwrap();
    assert_eq!(a.memory_id, "GPU_0_bfc");
    // Usage (stack 100 + heap) over time: 1100, 3100, 3600 (t=250), 2600, 3600 (t=400).
    // Two tied peaks: the latest, t=400, is the peak.
    let s = &a.summary;
    assert_eq!(s.peak_stats.peak_bytes_in_use, 3600);
    assert_eq!(s.peak_stats_time_ps, 400);
    assert_eq!(s.peak_stats.heap_allocated_bytes, 3500);
    assert_eq!(s.peak_stats.stack_reserved_bytes, 100);
    assert_eq!(s.peak_stats.free_memory_bytes, 6400);
    assert_eq!(s.peak_stats.fragmentation, 0.25);
    assert_eq!(s.memory_capacity, 10_000);
    // The lifetime peak is the latest event's own `peak_bytes_in_use`.
    assert_eq!(s.peak_bytes_usage_lifetime, 3500);
    assert_eq!(p.max_capacity(), Some(10_000));

    // Live at the peak: 0x2000 (2000 B), 0x4000 (1000 B), 0x3000 (500 B), then the stack row;
    // the heap is fully mapped (3500 = 2000 + 1000 + 500), so no "unused preallocated" row.
    let rows: Vec<(i64, i64)> = a
        .active_allocations
        .iter()
        .map(|r| (r.snapshot_index, r.special_index))
        .collect();
    assert_eq!(rows, [(0, -1), (1, -1), (2, -1), (-1, 0)]);
    let sizes: Vec<i64> = a
        .peak_snapshots
        .iter()
        .map(|s| s.meta.allocation_bytes)
        .collect();
    assert_eq!(sizes, [2000, 1000, 500]);
    assert_eq!(a.special_allocations[0].tf_op_name, "stack");
    assert_eq!(a.special_allocations[0].allocation_bytes, 100);

    // The deallocation inherits its allocation's op name; data type 1 is "float".
    let dealloc = a
        .snapshots
        .iter()
        .find(|s| s.meta.memory_activity == profile::Activity::Deallocation)
        .unwrap();
    assert_eq!(dealloc.meta.tf_op_name, format!("op@{}", 0x1000));
    assert_eq!(dealloc.meta.data_type, "float");

    let other = &p.allocators["1"];
    assert_eq!(other.summary.peak_stats.peak_bytes_in_use, 64);
    assert_eq!(other.summary.memory_capacity, 1000);
    // Its 64 heap bytes are its one live allocation.
    assert_eq!(other.active_allocations.len(), 1);

    let j = p.to_xprof_json();
    assert_eq!(j["hloModules"][1]["startTimePs"], "3000");
    assert_eq!(j["hloModules"][1]["endTimePs"], "3700");
    assert_eq!(j["hloModules"][1]["planeName"], "TPU:0");
    assert_eq!(
        j["memoryProfilePerAllocator"]["GPU_0_bfc"]["profileSummary"]["peakStats"]["peakBytesInUse"],
        "3600"
    );
}

#[test]
fn memory_profile_without_allocator_events_is_empty() {
    let bytes = XSpaceBuilder::new()
        .plane("/host:CPU", |p| p.line("main", |l| l.event("work", 0, 10)))
        .to_bytes();
    let p = profile::build(&XSpace::from_bytes(bytes).unwrap());
    assert!(p.has_host_plane);
    assert!(p.allocators.is_empty());
    assert_eq!(p.num_events, 0);

    let bytes = XSpaceBuilder::new()
        .plane("/device:TPU:0", |p| {
            p.line("XLA Ops", |l| l.event("x", 0, 1))
        })
        .to_bytes();
    let p = profile::build(&XSpace::from_bytes(bytes).unwrap());
    assert!(!p.has_host_plane);
}

#[test]
fn timeline_sampling_is_a_max_box_filter() {
    let snaps: Vec<profile::Snapshot> = [5, 9, 1, 7, 3]
        .iter()
        .enumerate()
        .map(|(i, h)| profile::Snapshot {
            time_offset_ps: i as i64,
            stats: profile::AggregationStats {
                heap_allocated_bytes: *h,
                ..Default::default()
            },
            meta: Default::default(),
            present: Default::default(),
        })
        .collect();
    // 5 points into 2: one box of width 2 ([5, 9] → 9), one of width 3 ([1, 7, 3] → 7).
    let s = profile::sample_timeline(&snaps, 2);
    let heaps: Vec<i64> = s.iter().map(|s| s.stats.heap_allocated_bytes).collect();
    assert_eq!(heaps, [9, 7]);
    assert_eq!(profile::sample_timeline(&snaps, 10).len(), 5);
}

// ---------------------------------------------------------------------------------------------
// HLO modules by hand

fn f32(dims: &[i64]) -> ShapeProto {
    ShapeProto {
        element_type: 11,
        dimensions: dims.to_vec(),
        ..Default::default()
    }
}

fn instr(
    id: i64,
    name: &str,
    opcode: &str,
    shape: ShapeProto,
    operands: &[i64],
) -> HloInstructionProto {
    HloInstructionProto {
        id,
        name: name.into(),
        opcode: opcode.into(),
        shape: Some(shape),
        operand_ids: operands.to_vec(),
        metadata: Some(OpMetadata {
            op_name: format!("jit(f)/{name}"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn lb(id: i64, size: i64, instruction_id: i64) -> LogicalBufferProto {
    LogicalBufferProto {
        id,
        size,
        defined_at: Some(Location {
            instruction_id,
            ..Default::default()
        }),
        color: 0,
    }
}

fn assigned(id: i64, offset: i64, size: i64) -> Assigned {
    Assigned {
        logical_buffer_id: id,
        offset,
        size,
    }
}

fn ev(kind: Kind, buffer_id: i64, name: &str) -> HeapEvent {
    HeapEvent {
        kind: kind as i32,
        buffer_id,
        instruction_name: name.into(),
        ..Default::default()
    }
}

/// p (32 KiB parameter) → a = exp(p) (32 KiB temp) → b = f32[16384] (64 KiB temp) → out
/// (32 KiB output). Temporaries share allocation 1 (96 KiB) and are simulated.
fn module_with_heap_trace(trace: Vec<HeapEvent>) -> HloProto {
    let comp = HloComputationProto {
        id: 1,
        name: "main".into(),
        instructions: vec![
            instr(1, "p", "parameter", f32(&[8192]), &[]),
            instr(2, "a", "exponential", f32(&[8192]), &[1]),
            instr(3, "b", "concatenate", f32(&[16384]), &[2, 2]),
            instr(4, "out", "slice", f32(&[8192]), &[3]),
        ],
        root_id: 4,
        ..Default::default()
    };
    HloProto {
        hlo_module: Some(HloModuleProto {
            name: "jit_f".into(),
            entry_computation_name: "main".into(),
            entry_computation_id: 1,
            computations: vec![comp],
            ..Default::default()
        }),
        buffer_assignment: Some(BufferAssignmentProto {
            logical_buffers: vec![
                lb(10, 32768, 1),
                lb(11, 32768, 2),
                lb(12, 65536, 3),
                lb(13, 32768, 4),
            ],
            buffer_allocations: vec![
                BufferAllocationProto {
                    index: 0,
                    size: 32768,
                    is_entry_computation_parameter: true,
                    assigned: vec![assigned(10, 0, 32768)],
                    ..Default::default()
                },
                BufferAllocationProto {
                    index: 1,
                    size: 98304,
                    assigned: vec![assigned(11, 0, 32768), assigned(12, 32768, 65536)],
                    ..Default::default()
                },
                BufferAllocationProto {
                    index: 2,
                    size: 32768,
                    maybe_live_out: true,
                    assigned: vec![assigned(13, 0, 32768)],
                    ..Default::default()
                },
            ],
            heap_simulator_traces: vec![HeapSimulatorTrace {
                events: trace,
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

#[test]
fn memory_viewer_peak_equals_hand_computation() {
    let proto = module_with_heap_trace(vec![
        ev(Kind::Alloc, 11, "a"),
        ev(Kind::Alloc, 12, "b"),
        ev(Kind::Free, 11, "a"),
        ev(Kind::Free, 12, "b"),
    ]);
    let r = viewer::preprocess(&proto, 0).unwrap();
    assert!(r.simulated);
    let kib = 1024;
    // Indefinite: p (32 KiB) + out (32 KiB) = 64 KiB under every point of the timeline.
    assert_eq!(r.indefinite_memory_usage_bytes, 64 * kib);
    // Heap before each event, then after the last: 0, 32, 96, 64, 0 KiB (+ 64 indefinite).
    let heap: Vec<i64> = r.heap_sizes_bytes.iter().map(|b| b / kib).collect();
    assert_eq!(heap, [64, 96, 160, 128, 64]);
    assert_eq!(r.peak_heap_bytes, 160 * kib);
    assert_eq!(r.peak_heap_size_position, 1);
    let names: Vec<&str> = r
        .max_heap
        .iter()
        .map(|o| o.instruction_name.as_str())
        .collect();
    assert_eq!(names, ["p", "out", "a", "b"]);
    let groups: Vec<&str> = r.max_heap.iter().map(|o| o.group_name.as_str()).collect();
    assert_eq!(groups, ["Parameter", "Output", "Temporary", "Temporary"]);
    assert_eq!(r.max_heap[3].label, "b: f32[16384] # jit(f)/b");
    // Largest first: b, then the 32 KiB ones in their order.
    assert_eq!(r.max_heap_by_size, [3, 0, 1, 2]);
    assert_eq!(r.logical_buffer_spans[&11], (0, 2));
    assert_eq!(r.logical_buffer_spans[&12], (1, 3));
    assert_eq!(r.total_buffer_allocation_bytes, 160 * kib);
    assert_eq!(r.entry_computation_parameters_bytes, 32 * kib);
    assert_eq!(r.maybe_live_out_bytes, 32 * kib);
    assert_eq!(r.indefinite_lifetimes.len(), 2);
    // The timeline: the temporary allocation and its two buffers.
    let blocks: Vec<(i64, i64, i64, i64)> = r
        .buffer_blocks
        .iter()
        .map(|b| (b.logical_buffer_id, b.offset, b.start_step, b.end_step))
        .collect();
    assert_eq!(blocks, [(-1, 0, 0, 4), (11, 0, 0, 2), (12, 32768, 1, 3)]);
    let j = r.to_xprof_json();
    assert_eq!(j["peakHeapMib"], 160.0 / 1024.0);
    assert_eq!(j["maxHeap"][0]["numbered"], 0);

    // Peak allocations of this module, official-CLI style with a 0.04 MiB threshold.
    let m = peak::module_peak(
        "jit_f(1)",
        &r,
        peak::Options {
            min_size_mib: 0.04,
            aggregate: true,
        },
    );
    let rows: Vec<(&str, i64)> = m
        .top_buffers
        .iter()
        .map(|b| (b.instruction.as_str(), b.size_bytes))
        .collect();
    // p, out and a (32 KiB each) are under the threshold.
    assert_eq!(rows, [("Others (< 0.04 MiB)", 98304), ("b", 65536)]);
}

#[test]
fn memory_viewer_rejects_a_trace_that_frees_twice() {
    let proto = module_with_heap_trace(vec![
        ev(Kind::Alloc, 11, "a"),
        ev(Kind::Free, 11, "a"),
        ev(Kind::Free, 11, "a"),
    ]);
    let e = viewer::preprocess(&proto, 0).unwrap_err().to_string();
    assert!(e.contains("freed multiple times"), "{e}");
}

#[test]
fn memory_viewer_shared_buffer_counts_once() {
    // b shares a's memory while a is live (no new bytes), then reuses it after a is freed.
    let mut share = ev(Kind::ShareWith, 12, "b");
    share.share_with_canonical_id = 11;
    let proto = module_with_heap_trace(vec![
        ev(Kind::Alloc, 11, "a"),
        share,
        ev(Kind::Free, 11, "a"),
        ev(Kind::Free, 12, "b"),
    ]);
    let r = viewer::preprocess(&proto, 0).unwrap();
    let heap: Vec<i64> = r.heap_sizes_bytes.iter().map(|b| b / 1024).collect();
    // a's 32 KiB once, while either holds it.
    assert_eq!(heap, [64, 96, 96, 96, 64]);
    assert_eq!(r.peak_heap_bytes, 96 * 1024);
}

#[test]
fn memory_viewer_without_buffer_assignment_is_empty_not_a_panic() {
    let proto = HloProto {
        hlo_module: Some(HloModuleProto {
            name: "m".into(),
            ..Default::default()
        }),
        buffer_assignment: None,
    };
    let r = viewer::preprocess(&proto, 0).unwrap();
    assert!(r.max_heap.is_empty());
    assert_eq!(r.peak_heap_bytes, 0);
    assert_eq!(r.to_xprof_json()["moduleName"], "m");
}

#[test]
fn peak_allocations_aggregate_numbered_names() {
    let obj = |name: &str, mib: i64| viewer::HeapObject {
        numbered: 0,
        label: String::new(),
        logical_buffer_id: 1,
        size_bytes: mib << 20,
        unpadded_bytes: 0,
        instruction_name: name.into(),
        shape_string: String::new(),
        tf_op_name: String::new(),
        group_name: String::new(),
        op_code: String::new(),
        source_info: Default::default(),
    };
    let r = viewer::PreprocessResult {
        max_heap: vec![
            obj("copy.1", 1),
            obj("dot", 4),
            obj("copy.2", 1),
            obj("copy.3", 2),
        ],
        total_buffer_allocation_bytes: 8 << 20,
        ..Default::default()
    };
    let m = peak::module_peak("m", &r, peak::Options::default());
    let rows: Vec<(&str, i64)> = m
        .top_buffers
        .iter()
        .map(|b| (b.instruction.as_str(), b.size_bytes >> 20))
        .collect();
    assert_eq!(
        rows,
        [
            ("dot", 4),
            ("copy.* (2 occurrences of size 1 MiB)", 2),
            ("copy.3", 2)
        ]
    );
    let ranked = peak::rank(
        vec![
            peak::module_peak(
                "small",
                &viewer::PreprocessResult::default(),
                Default::default(),
            ),
            m,
        ],
        1,
    );
    assert_eq!(ranked.len(), 1);
    assert_eq!(ranked[0].module_name, "m");
    assert_eq!(ranked[0].to_json()["total_hbm_mib"], 8.0);
}

// ---------------------------------------------------------------------------------------------
// Unfused reshapes

/// Entry: x → transpose → dot(·, w); y → copy → add; plus a fusion whose body transposes
/// (fused, so not standalone).
fn reshape_module() -> HloModuleProto {
    let fused = HloComputationProto {
        id: 2,
        name: "fused_computation".into(),
        is_fusion_computation: true,
        instructions: vec![
            instr(20, "param_0", "parameter", f32(&[64, 32]), &[]),
            instr(21, "transpose.9", "transpose", f32(&[32, 64]), &[20]),
        ],
        root_id: 21,
        ..Default::default()
    };
    let mut fusion = instr(8, "transpose_fusion", "fusion", f32(&[32, 64]), &[5]);
    fusion.called_computation_ids = vec![2];
    let entry = HloComputationProto {
        id: 1,
        name: "main".into(),
        instructions: vec![
            instr(1, "x", "parameter", f32(&[128, 256]), &[]),
            instr(2, "w", "parameter", f32(&[128, 64]), &[]),
            instr(3, "transpose.1", "transpose", f32(&[256, 128]), &[1]),
            instr(4, "dot.1", "dot", f32(&[256, 64]), &[3, 2]),
            instr(5, "y", "parameter", f32(&[64, 32]), &[]),
            instr(6, "copy.2", "copy", f32(&[64, 32]), &[5]),
            instr(7, "add.1", "add", f32(&[64, 32]), &[6, 6]),
            fusion,
        ],
        root_id: 4,
        ..Default::default()
    };
    HloModuleProto {
        name: "jit_g".into(),
        entry_computation_name: "main".into(),
        entry_computation_id: 1,
        computations: vec![fused, entry],
        ..Default::default()
    }
}

#[test]
fn standalone_transpose_feeding_a_dot_is_found_ranked_and_shown() {
    let m = reshape_module();
    let modules = [reshapes::ModuleRef {
        display_name: "jit_g(7)".into(),
        program_id: Some(7),
        proto: &m,
    }];
    let ops = [reshapes::OpTime {
        program_id: 7,
        name: "copy.2".into(),
        occurrences: 3,
        time_ps: 9_000,
        self_time_ps: 9_000,
        bytes_accessed: 16_384,
    }];
    // Unmeasured: ranked by bytes (the transpose moves 2 × 128 KiB, the copy 2 × 8 KiB).
    let f = reshapes::detect(&modules, &[]);
    let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["transpose.1", "copy.2"],
        "the fused transpose is not standalone"
    );
    let t = &f[0];
    assert!(t.feeds_compute());
    assert_eq!(t.downstream_compute.as_deref(), Some("dot.1"));
    assert_eq!(t.output_bytes, 128 * 1024);
    assert_eq!(t.operands[0].name, "x");
    assert_eq!(t.users[0].name, "dot.1");
    assert!(t.users[0].text.contains("dot("), "{}", t.users[0].text);
    let j = t.to_json();
    assert_eq!(j["hbm_materialization_overhead"], true);
    assert!(j["recommendation"].as_str().unwrap().contains("'dot.1'"));
    assert!(!f[1].feeds_compute(), "copy.2 feeds an add");

    // Measured time ranks first.
    let f = reshapes::detect(&modules, &ops);
    assert_eq!(f[0].name, "copy.2");
    assert_eq!(f[0].time_ps(), 9_000);
    assert_eq!(f[0].to_json()["hbm_materialization_overhead"], false);
}

#[test]
fn fused_formatting_ops_are_not_reported() {
    let mut m = reshape_module();
    // Keep only the fusion and its body.
    m.computations[1]
        .instructions
        .retain(|i| matches!(i.name.as_str(), "y" | "transpose_fusion"));
    let modules = [reshapes::ModuleRef {
        display_name: "jit_g(7)".into(),
        program_id: Some(7),
        proto: &m,
    }];
    assert!(reshapes::detect(&modules, &[]).is_empty());
}

#[test]
fn a_fusion_counts_as_compute_only_when_its_body_computes() {
    let mut m = reshape_module();
    // transpose.1 now feeds a fusion wrapping the dot; copy.2 a loop fusion (an add).
    let dot_body = HloComputationProto {
        id: 3,
        name: "fused_dot".into(),
        is_fusion_computation: true,
        instructions: vec![
            instr(30, "param_0.1", "parameter", f32(&[256, 128]), &[]),
            instr(31, "param_1.1", "parameter", f32(&[128, 64]), &[]),
            instr(32, "dot.7", "dot", f32(&[256, 64]), &[30, 31]),
        ],
        root_id: 32,
        ..Default::default()
    };
    let add_body = HloComputationProto {
        id: 4,
        name: "fused_add".into(),
        is_fusion_computation: true,
        instructions: vec![
            instr(40, "param_0.2", "parameter", f32(&[64, 32]), &[]),
            instr(41, "add.7", "add", f32(&[64, 32]), &[40, 40]),
        ],
        root_id: 41,
        ..Default::default()
    };
    let entry = &mut m.computations[1];
    for i in &mut entry.instructions {
        match i.name.as_str() {
            "dot.1" => {
                i.opcode = "fusion".into();
                i.called_computation_ids = vec![3];
            }
            "add.1" => {
                i.opcode = "fusion".into();
                i.operand_ids = vec![6];
                i.called_computation_ids = vec![4];
            }
            _ => {}
        }
    }
    m.computations.push(dot_body);
    m.computations.push(add_body);
    let modules = [reshapes::ModuleRef {
        display_name: "jit_g(7)".into(),
        program_id: Some(7),
        proto: &m,
    }];
    let f = reshapes::detect(&modules, &[]);
    let flagged: Vec<(&str, bool)> = f
        .iter()
        .map(|f| (f.name.as_str(), f.feeds_compute()))
        .collect();
    assert_eq!(flagged, [("transpose.1", true), ("copy.2", false)]);
    assert_eq!(f[0].users[0].fused_compute, Some(true));
    assert_eq!(f[1].users[0].fused_compute, Some(false));
}

#[test]
fn absent_allocator_stats_are_null_with_a_reason_not_zero() {
    // Heap and stack only: no bytes_available, no fragmentation.
    let bytes = XSpaceBuilder::new()
        .plane("/host:CPU", |p| {
            p.line("main", |l| {
                l.event("MemoryAllocation", 10, 0)
                    .stat("allocator_name", "GPU_0_bfc")
                    .stat("addr", 1i64)
                    .stat("allocation_bytes", 1i64 << 30)
                    .stat("bytes_allocated", 1i64 << 30)
                    .stat("bytes_reserved", 0i64)
            })
        })
        .to_bytes();
    let p = profile::build(&XSpace::from_bytes(bytes).unwrap());
    let s = p.seed_summary().unwrap();
    assert_eq!(s["peak_memory_usage_gib"], 1.0);
    assert!(s["memory_capacity_gib"].is_null());
    assert!(
        s["memory_capacity_gib_reason"]
            .as_str()
            .unwrap()
            .contains("bytes_available")
    );
    let d = &s["peak_usage_details"];
    assert!(d["fragmentation_percent"].is_null());
    assert!(
        d["fragmentation_percent_reason"]
            .as_str()
            .unwrap()
            .contains("fragmentation")
    );
    assert!(d["utilization_percent"].is_null());
    assert_eq!(d["heap_allocation_gib"], 1.0);

    // With the stats present, the seed's numbers: 3600 B of 10 000 B.
    let p = profile::build(&XSpace::from_bytes(allocator_capture()).unwrap());
    let s = p.seed_summary().unwrap();
    assert_eq!(s["peak_usage_details"]["fragmentation_percent"], 25.0);
    assert_eq!(s["memory_capacity_gib"], 0.0);
}

/// Mutated buffer assignments (dangling ids, wrong event kinds, self and cyclic sharing,
/// negative sizes) give an answer or an error, never a panic.
#[test]
fn memory_viewer_survives_mutated_buffer_assignments() {
    let base = {
        let mut share = ev(Kind::ShareWith, 12, "b");
        share.share_with_canonical_id = 11;
        module_with_heap_trace(vec![
            ev(Kind::Alloc, 11, "a"),
            share,
            ev(Kind::Alloc, 13, "out"),
            ev(Kind::Free, 11, "a"),
            ev(Kind::Free, 12, "b"),
        ])
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    let mut outcomes = (0, 0);
    for _ in 0..500 {
        let mut p = base.clone();
        let ba = p.buffer_assignment.as_mut().unwrap();
        for _ in 0..1 + next(4) {
            match next(7) {
                0 => {
                    let e = &mut ba.heap_simulator_traces[0].events;
                    let i = next(e.len() as u64) as usize;
                    e[i].kind = next(4) as i32;
                }
                1 => {
                    let e = &mut ba.heap_simulator_traces[0].events;
                    let i = next(e.len() as u64) as usize;
                    e[i].buffer_id = 9 + next(6) as i64;
                }
                2 => {
                    let e = &mut ba.heap_simulator_traces[0].events;
                    let i = next(e.len() as u64) as usize;
                    e[i].kind = Kind::ShareWith as i32;
                    e[i].share_with_canonical_id = 9 + next(6) as i64;
                }
                3 => {
                    let i = next(ba.logical_buffers.len() as u64) as usize;
                    ba.logical_buffers[i].size = -(next(1 << 20) as i64);
                }
                4 => {
                    let i = next(ba.logical_buffers.len() as u64) as usize;
                    ba.logical_buffers.remove(i);
                }
                5 => {
                    let i = next(ba.buffer_allocations.len() as u64) as usize;
                    ba.buffer_allocations[i].color = next(2) as i64;
                    ba.buffer_allocations[i].is_thread_local = next(2) == 0;
                }
                _ => {
                    let i = next(ba.logical_buffers.len() as u64) as usize;
                    if let Some(l) = ba.logical_buffers[i].defined_at.as_mut() {
                        l.instruction_id = next(8) as i64;
                        l.shape_index = vec![next(3) as i64 - 1];
                    }
                }
            }
        }
        for color in [0, 1] {
            match viewer::preprocess(&p, color) {
                Ok(r) => {
                    let _ = r.to_xprof_json();
                    outcomes.0 += 1;
                }
                Err(e) => {
                    assert!(!e.to_string().is_empty());
                    outcomes.1 += 1;
                }
            }
        }
    }
    // Both outcomes occur: the mutations reach the checks.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}
