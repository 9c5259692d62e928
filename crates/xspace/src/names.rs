//! XProf's plane, line and stat names (`xla/tsl/profiler/utils/xplane_schema.cc`), so callers
//! and tests spell them once. Each constant is documented by its value.
#![allow(missing_docs)]

/// Plane names and prefixes.
pub mod plane {
    pub const HOST_CPU: &str = "/host:CPU";
    pub const HOST_METADATA: &str = "/host:metadata";
    pub const TASK_ENVIRONMENT: &str = "Task Environment";
    pub const TPU_PREFIX: &str = "/device:TPU:";
    pub const GPU_PREFIX: &str = "/device:GPU:";
    pub const CUSTOM_PREFIX: &str = "/device:CUSTOM:";
}

/// Line names.
pub mod line {
    pub const XLA_MODULES: &str = "XLA Modules";
    pub const XLA_OPS: &str = "XLA Ops";
    pub const ASYNC_XLA_OPS: &str = "Async XLA Ops";
    pub const STEPS: &str = "Steps";
    pub const SPARSE_CORE_OPS: &str = "Sparse Core Ops";
    pub const SPARSE_CORE_MODULES: &str = "Sparse Core Modules";
    pub const SPARSE_CORE_STEPS: &str = "Sparse Core Steps";
    pub const COUNTERS: &str = "_counters_";
}

/// Event names.
pub mod event {
    pub const MEMORY_ALLOCATION: &str = "MemoryAllocation";
    pub const MEMORY_DEALLOCATION: &str = "MemoryDeallocation";
}

/// Stat names.
pub mod stat {
    pub const DEVICE_OFFSET_PS: &str = "device_offset_ps";
    pub const DEVICE_DURATION_PS: &str = "device_duration_ps";
    pub const PROGRAM_ID: &str = "program_id";
    pub const HLO_PROTO: &str = "Hlo Proto";
    pub const HLO_CATEGORY: &str = "hlo_category";
    pub const HLO_OP: &str = "hlo_op";
    pub const HLO_MODULE: &str = "hlo_module";
    pub const FLOPS: &str = "flops";
    pub const MODEL_FLOPS: &str = "model_flops";
    pub const BYTES_ACCESSED: &str = "bytes_accessed";
    pub const GROUP_ID: &str = "group_id";
    pub const STEP_NUM: &str = "step_num";
    pub const CORRELATION_ID: &str = "correlation_id";
    pub const KERNEL_DETAILS: &str = "kernel_details";
    pub const TF_OP: &str = "tf_op";
    pub const PEAK_TERAFLOPS_PER_SECOND: &str = "peak_teraflops_per_second";
    pub const PEAK_HBM_BW_GIGABYTES_PER_SECOND: &str = "peak_hbm_bw_gigabytes_per_second";
    pub const BYTES_ALLOCATED: &str = "bytes_allocated";
    pub const BYTES_RESERVED: &str = "bytes_reserved";
    pub const BYTES_AVAILABLE: &str = "bytes_available";
    pub const PEAK_BYTES_IN_USE: &str = "peak_bytes_in_use";
    pub const REQUESTED_BYTES: &str = "requested_bytes";
    pub const ALLOCATION_BYTES: &str = "allocation_bytes";
    pub const PROFILE_START_TIME: &str = "profile_start_time";
    pub const PROFILE_STOP_TIME: &str = "profile_stop_time";
}
