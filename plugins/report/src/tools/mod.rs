mod export_trace;
mod report;
