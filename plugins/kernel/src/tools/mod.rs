// One tool per file.
mod get_custom_call_mlir;
mod get_llo_bundles;
mod get_llo_fit_summary;
mod get_llo_schedule_analysis;
mod get_llo_static_utilization;
mod list_llo_programs;
