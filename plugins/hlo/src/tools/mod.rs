// One tool per file.
mod diff_hlo_stages;
mod get_graph_viewer;
mod get_hlo_dump;
mod get_hlo_dump_neighborhood;
mod get_hlo_module_content;
mod get_hlo_neighborhood;
mod get_hlo_text;
mod list_hlo_dump_modules;
mod list_hlo_modules;
mod query_hlo_graph;
