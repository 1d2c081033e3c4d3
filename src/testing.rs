//! What the integration tests, benches, examples and fuzz targets use beyond the library's
//! interface, under the paths the crate has them at (`keyhole::testing::context::proposals` is
//! `crate::context::proposals`). Hidden from the docs and not for embedders: what an embedder
//! needs is re-exported at the crate root, and a test uses it from there.

pub mod candidate {
    pub use crate::candidate::{
        ContextType, PromptSource, RETRIEVED_SHARE, id_kinds, proposal_specs,
    };
}
pub mod compose {
    pub use crate::compose::{
        CandidateContext, Composer, DEFAULT_BUDGET, DefaultReading, Prompt, compose,
        default_context, proposal_allocation,
    };
}
pub mod context {
    pub use crate::context::HoleRequest;
    pub mod perspectives {
        pub use crate::context::perspectives::{
            Perspectives, around_hole, build_all, first_completion, iteration_query, line_request,
            repocoder_query,
        };
    }
    pub mod profile {
        pub mod code {
            pub use crate::context::profile::code::BLOCK_BUDGET;
        }
    }
    pub mod proposals {
        pub use crate::context::proposals::{ProposalContext, build, build_all, build_for_budget};
    }
    pub mod retrieval {
        pub use crate::context::retrieval::{Retrieval, hole_window};
    }
    pub mod typed {
        pub use crate::context::typed::{
            MAX_HEADERS, TYPE_DEPTH, TypedHole, completion_errors, hole_completion_errors,
        };
    }
    pub mod typed_server {
        pub use crate::context::typed_server::{ServerAnswer, ask, contexts, would_ask_a_server};
    }
    pub mod windows {
        pub use crate::context::windows::{MAX_BLOCKS, MAX_HITS, Shown, Similarity, WindowIndex};
    }
}
pub mod eval {
    pub use crate::label::{LabelRow, RLPG_CANDIDATES, ROWS_PER_HOLE, WRITTEN_ROWS, hole_id};
    pub mod interop {
        pub use crate::eval::interop::{Task, TaskError, export_row, read_tasks, write_jsonl};
    }
    pub mod labels {
        pub use crate::eval::labels::{LabelFile, LabelIndex, read_all, read_dir, read_file};
    }
    pub mod report {
        pub use crate::eval::report::{
            Builder, Choices, MAX_K, MethodRow, Report, Tally, Truncation, build, build_from,
            train_procc, write,
        };
    }
    pub mod runner {
        pub use crate::eval::runner::NOT_SELECTED;
    }
}
pub mod explain {
    pub use crate::explain::{ExplainedSpan, explain, explained_fraction};
}
pub mod feedback {
    pub use crate::feedback::{ApplyError, Pick, append_pick, apply_completion, prompt_hash};
}
pub mod hole {
    pub use crate::hole::{DEFAULT_SEED, HoleColumn, HoleWindow, every_line, sample_holes};
}
pub mod lang {
    pub use crate::lang::{FileFacts, Java, Language, Span, for_path, is_vendored_dir};
    pub mod java {
        pub use crate::lang::java::parse;
    }
}
pub mod lsp {
    pub use crate::lsp::{
        Client, LspError, PYRIGHT, ServerSpec, Servers, TYPESCRIPT, Timeouts, find_on_path,
        read_body, read_message, write_message,
    };
}
pub mod model {
    pub use crate::model::DEFAULT_MAX_TOKENS;
    pub mod config {
        pub use crate::model::config::{BACKENDS_FILE, Matrices, load_backends, parse_backends};
    }
    #[cfg(feature = "http")]
    pub mod http {
        pub use crate::model::http::{MAX_ANSWER_BYTES, build_http, read_stream};
    }
    #[cfg(feature = "local-model")]
    pub mod local {
        pub use crate::model::local::{LocalBackend, LocalModel, panics_caught, use_threads};
    }
    pub mod ngram {
        pub use crate::model::ngram::EmbeddedModel;
    }
}
pub mod proxy {
    pub use crate::proxy::{
        Answered, Certainty, Composition, DEFAULT_MAX_BYTES, Exchange, ExtraChunk, RecordStore,
        Sent, log_dir, read_log,
    };
    pub mod ab {
        pub use crate::proxy::ab::{Arm, Judged, Outcome};
    }
}
pub mod pin {
    pub use crate::pin::Pin;
}
pub mod rank {
    pub use crate::rank::RankInput;
    use crate::session::Procc;

    /// The features ProCC's bandit chose `procc`'s candidate from.
    pub fn procc_context(procc: &Procc) -> &bandit::Context {
        &procc.context
    }
    pub mod bandit {
        pub use crate::rank::bandit::{Context, FILE, LinUcb, context};
    }
    pub mod classifier {
        pub use crate::rank::classifier::{Classifier, Variant};
        pub mod bert {
            pub use crate::rank::classifier::bert::BertEncoder;
        }
        #[cfg(feature = "train")]
        pub mod dataset {
            pub use crate::rank::classifier::dataset::{Example, Inputs};
        }
        #[cfg(feature = "train")]
        pub mod train {
            pub use crate::rank::classifier::train::{Holdout, TrainOptions, train};
        }
    }
    pub mod online {
        pub use crate::rank::online::OnlineRanker;
    }
}
pub mod repo {
    use crate::lang::FileFacts;
    use crate::lsp::Servers;
    pub use crate::repo::{MAX_FILE_BYTES, RepoGraph, Vendored};
    use crate::repo::{RepoIndex, SourceFile};

    /// The 32 bytes a cache file holds before `payload`: its checksum, for tests that damage
    /// a cache file and seal it again.
    pub fn cache_seal(payload: &[u8]) -> [u8; 32] {
        crate::repo::seal(payload)
    }

    /// What the parse of `file` found (the field is the crate's: it must match the file).
    pub fn facts(file: &SourceFile) -> &FileFacts {
        &file.facts
    }

    /// How `index`'s files import and extend each other.
    pub fn graph(index: &RepoIndex) -> &RepoGraph {
        &index.graph
    }

    /// `index`'s language servers, to point at pinned or fake ones.
    pub fn language_servers(index: &mut RepoIndex) -> &mut Servers {
        &mut index.language_servers
    }
}
pub mod session {
    use crate::context::perspectives::Perspectives;
    pub use crate::session::SearchIndex;
    use crate::session::Session;

    /// Learning that ranks with `classifier`, keeping what it learns in `dirs`.
    pub fn learning_with(
        classifier: crate::rank::classifier::Classifier,
        dirs: crate::Dirs,
    ) -> crate::Learning {
        crate::Learning::with_classifier(classifier, dirs)
    }

    /// The retrieval perspectives over `session`'s repository.
    pub fn perspectives(session: &Session) -> Perspectives<'_> {
        session.perspectives()
    }
    pub mod tuned {
        pub use crate::session::tuned::{
            CLASSIFIER_FILE, TunedInfo, model_name, record, tuned_dir,
        };
    }
}
pub mod token {
    pub use crate::token::truncate;
}
#[cfg(feature = "tui")]
pub mod tui {
    pub use crate::tui::{FIXTURES, Format, Options, render_fixture};
    pub mod app {
        pub use crate::tui::app::App;
    }
    pub mod command {
        pub use crate::tui::command::{Command, Pane};
    }
    pub mod driver {
        pub use crate::tui::driver::Outcome;
        pub mod watch {
            pub use crate::tui::driver::watch::Watch;
        }
    }
    pub mod keymap {
        pub use crate::tui::keymap::{Keymap, Layer, USER_FILE, parse_key};
    }
    pub mod state {
        pub use crate::tui::state::{
            Action, AnalysisPhase, DiffLine, Finished, Mode, Phase, Setup, State, apply_preview,
            backend_summary, key_action,
        };
    }
    pub mod theme {
        pub use crate::tui::theme::{Theme, USER_FILE};
    }
    pub mod ui {
        pub use crate::tui::ui::draw;
        pub mod candidates {
            pub use crate::tui::ui::candidates::{note, title};
        }
        pub mod prompt {
            pub use crate::tui::ui::prompt::title;
        }
        pub mod source {
            pub use crate::tui::ui::source::title;
        }
    }
}
