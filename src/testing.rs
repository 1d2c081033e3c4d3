//! What the integration tests, benches, examples and fuzz targets reach beyond the library's
//! interface: the crate's own modules, under their own names (`keyhole::testing::context::...`
//! is `crate::context::...`). Hidden from the docs and not for embedders; what an embedder
//! needs is re-exported at the crate root.

pub mod candidate {
    pub use crate::candidate::*;
}
pub mod compose {
    pub use crate::compose::*;
}
pub mod context {
    pub use crate::context::*;
}
pub mod eval {
    pub use crate::eval::*;
    pub use crate::label::{LabelRow, RLPG_CANDIDATES, ROWS_PER_HOLE, WRITTEN_ROWS, hole_id};
    pub mod interop {
        pub use crate::eval::interop::*;
    }
    pub mod labels {
        pub use crate::eval::labels::*;
    }
    pub mod report {
        pub use crate::eval::report::*;
    }
    pub mod runner {
        pub use crate::eval::runner::*;
    }
}
pub mod explain {
    pub use crate::explain::*;
}
pub mod feedback {
    pub use crate::feedback::*;
}
pub mod hole {
    pub use crate::hole::*;
}
pub mod lang {
    pub use crate::lang::*;
}
pub mod lsp {
    pub use crate::lsp::*;
}
pub mod model {
    pub use crate::model::*;
}
pub mod proxy {
    pub use crate::proxy::*;
}
pub mod rank {
    pub use crate::rank::*;
}
pub mod repo {
    pub use crate::repo::*;
}
pub mod session {
    pub use crate::session::*;
}
pub mod token {
    pub use crate::token::*;
}
#[cfg(feature = "tui")]
pub mod tui {
    pub use crate::tui::*;
}
