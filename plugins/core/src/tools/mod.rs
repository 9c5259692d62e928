mod get_hosts;
mod list_runs;
