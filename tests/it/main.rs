//! keyhole's integration tests, one module per area, in one binary (one link, not 27).
//!
//! Every test runs hermetically: child processes get their own temporary config, cache and
//! data directories, and library calls are given directories explicitly.

mod backends_support;
mod common;
mod reliability_support;

mod architecture;
mod backends_config;
mod backends_faults;
mod backends_protocols;
mod classifier;
mod classifier_bert;
mod cli;
mod cli_complete;
mod compose;
mod derived_cache;
mod docs_keys;
mod embedded_model;
mod eval_candidates;
mod eval_interop;
mod eval_labels;
mod eval_report;
mod eval_scale;
mod explain;
mod feedback;
mod fidelity;
mod fit;
mod index;
mod lang_python;
mod lang_typescript;
mod local_model;
mod lsp_client;
mod proposals;
mod proxy;
mod proxy_ab;
mod proxy_access;
mod proxy_compose;
mod proxy_faults;
mod proxy_secrets;
mod proxy_store;
mod python_imports;
mod reliability_eval;
mod reliability_faults;
mod reliability_inputs;
mod reliability_limits;
mod reliability_runs;
mod reliability_secrets;
mod reliability_state;
mod retrieval;
mod retrieval_repocoder;
mod session;
mod tui_app;
mod tui_picks;
mod tui_recorded;
mod tui_snapshots;
mod tui_tmux;
mod tune;
mod typed_holes;
mod typed_server;
mod typescript_imports;
