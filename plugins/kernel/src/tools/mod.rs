// One tool per file.
mod check_kernel_profiling;
mod get_custom_call_mlir;
mod get_device_wall_report;
mod get_kernel_stage_breakdown;
mod get_llo_bundles;
mod get_llo_fit_summary;
mod get_llo_schedule_analysis;
mod get_llo_static_utilization;
mod get_llo_utilization;
mod list_kernel_invocations;
mod list_llo_programs;
