mod export_trace;
