//! The record of what editor plugins sent through the proxy: one SQLite database
//! (`exchanges.sqlite3`) in keyhole's data directory that any number of keyhole processes use
//! at once (a proxy per server, UIs, `keyhole recorded`). Write-ahead logging lets readers read
//! while a proxy writes and never shows them half a record; each append is one transaction that
//! takes the next id (never reused, not even after the oldest are deleted) and keeps the store
//! within its limit by deleting the oldest records, whoever wrote them. A single exchange is
//! capped well below that limit ([`RecordStore::exchange_cap`]), so it cannot evict the history.
//! The JSON-lines logs of earlier versions are moved in on first open and kept, renamed.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::arms::{Judged, Outcome};
use super::compose::Composition;
use super::exchange::{Answered, Sent};

/// The default limit of the whole store.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

const DATABASE: &str = "exchanges.sqlite3";
/// The logs of earlier versions, oldest first; each is renamed `NAME.migrated` once moved in.
const OLD_LOGS: [&str; 2] = ["exchanges.1.jsonl", "exchanges.jsonl"];

/// How long a process waits for another's write before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// `exchanges` holds each record as JSON (its id in the row's key), `bytes` its size; `totals`
/// the sum of those sizes, kept by triggers in the same transaction as each insert and delete.
/// AUTOINCREMENT: an id is never handed out twice, even once its row is gone.
const SCHEMA: &str = "
    CREATE TABLE IF NOT EXISTS exchanges (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL,
        bytes INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS exchanges_by_time ON exchanges (at);
    CREATE TABLE IF NOT EXISTS totals (bytes INTEGER NOT NULL);
    INSERT INTO totals (bytes) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM totals);
    CREATE TRIGGER IF NOT EXISTS exchanges_added AFTER INSERT ON exchanges
        BEGIN UPDATE totals SET bytes = bytes + NEW.bytes; END;
    CREATE TRIGGER IF NOT EXISTS exchanges_removed AFTER DELETE ON exchanges
        BEGIN UPDATE totals SET bytes = bytes - OLD.bytes; END;
";

/// One request a plugin made and what came back.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Exchange {
    /// Numbered from 1, unique in the store whichever process recorded it.
    pub id: u64,
    /// When the request came, in seconds since the Unix epoch.
    pub at: f64,
    /// The client's address.
    pub client: String,
    /// The client's own name for itself (its User-Agent: `curl/8.5.0`, `axios/1.7.9`), where
    /// it sent one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub agent: Option<String>,
    pub method: String,
    /// The path (and query, credentials redacted) the plugin asked for.
    pub endpoint: String,
    /// The server, with any credentials in its URL masked.
    pub upstream: String,
    /// The server's status, 502 when it could not be reached, 403 when the proxy refused.
    pub status: u16,
    pub sent: Sent,
    pub answered: Answered,
    /// Milliseconds from the request to the first byte of the answer.
    pub first_byte_ms: Option<f64>,
    /// Milliseconds from the request to the end of the answer (or the hang-up).
    pub total_ms: f64,
    /// The client hung up before the answer ended.
    pub cancelled: bool,
    /// The proxy refused the request (a web page's, or for a host it does not serve): it never
    /// reached the server.
    #[serde(skip_serializing_if = "is_false", default)]
    pub refused: bool,
    /// Why the server could not be reached, or the proxy refused, or the server refused.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// The request body's size as it came, and whether only its start is kept.
    #[serde(default)]
    pub request_bytes: u64,
    #[serde(skip_serializing_if = "is_false", default)]
    pub request_cut: bool,
    /// The answer body's size as it came, and whether only its start is kept.
    #[serde(default)]
    pub answer_bytes: u64,
    #[serde(skip_serializing_if = "is_false", default)]
    pub answer_cut: bool,
    /// What `--compose` did: keyhole's prompt in place of the plugin's (`sent` above stays
    /// what the plugin sent), or why the plugin's went as sent. `None` without `--compose`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub composition: Option<Composition>,
    /// Whether the person kept the completion, where the request was in an arm of the A/B
    /// and its outcome was inferred ([`super::ab`]); kept in the store's own columns, which
    /// are written after the record.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub judged: Option<Judged>,
}

fn is_false(flag: &bool) -> bool {
    !flag
}

impl Exchange {
    /// Who sent it, as people read it: the client's name for itself (its product, without
    /// the version), else its address.
    pub fn sender(&self) -> &str {
        match &self.agent {
            Some(agent) => agent.split(['/', ' ']).next().unwrap_or(agent),
            None => &self.client,
        }
    }
}

/// The store, open in one process.
pub struct RecordStore {
    dir: PathBuf,
    max_bytes: u64,
    connection: Mutex<Connection>,
}

impl RecordStore {
    /// Open (creating) the store in `dir`, moving in the logs of earlier versions; appends keep
    /// it within `max_bytes`. The directory is made `0700` and the files `0600`: what plugins
    /// send is a person's code.
    pub fn open(dir: &Path, max_bytes: u64) -> std::io::Result<RecordStore> {
        let path = dir.join(DATABASE);
        let named = |e: rusqlite::Error| {
            std::io::Error::other(format!("record store {}: {e}", path.display()))
        };
        let named_io = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("record store {}: {e}", path.display()))
        };
        make_private_dir(dir).map_err(named_io)?;
        // Made before SQLite opens it, which gives its journal files the same mode.
        private_file(&path).map_err(named_io)?;
        let mut connection = Connection::open(&path).map_err(named)?;
        connection.busy_timeout(BUSY_TIMEOUT).map_err(named)?;
        connection
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(named)?;
        // In WAL mode NORMAL never corrupts the store and a crash of the process loses
        // nothing; only a power cut may lose the last exchanges. FULL would sync every append.
        connection
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(named)?;
        connection.execute_batch(SCHEMA).map_err(named)?;
        add_columns(&mut connection).map_err(named)?;
        for name in OLD_LOGS {
            migrate(&mut connection, &dir.join(name)).map_err(|e| {
                std::io::Error::new(e.kind(), format!("{}: {e}", dir.join(name).display()))
            })?;
        }
        Ok(RecordStore {
            dir: dir.to_path_buf(),
            max_bytes,
            connection: Mutex::new(connection),
        })
    }

    /// Where the store lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The largest record one exchange may take: a quarter of the store, so that one huge
    /// exchange leaves most of the history in place.
    pub fn exchange_cap(&self) -> u64 {
        self.max_bytes / 4
    }

    /// Append `exchange` under the next id (which it returns), deleting the oldest records
    /// (anyone's) while the store is over its limit; all in one transaction.
    pub fn append(&self, exchange: &Exchange) -> std::io::Result<u64> {
        let record = serde_json::to_string(exchange).map_err(std::io::Error::other)?;
        let bytes = record.len() as u64;
        if bytes > self.exchange_cap() {
            return Err(std::io::Error::other(format!(
                "the exchange takes {bytes} bytes, over the {} one exchange may take",
                self.exchange_cap()
            )));
        }
        let mut connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let id = append_within(&mut connection, exchange, &record, self.max_bytes)
            .map_err(|e| self.error(e))?;
        Ok(id)
    }

    /// Keep the outcome inferred for exchange `id` (where the store still has it).
    pub fn set_judged(&self, id: u64, judged: Judged) -> std::io::Result<()> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        connection
            .execute(
                "UPDATE exchanges SET outcome = ?1, accepted_chars = ?2 WHERE id = ?3",
                params![
                    judged.outcome.name(),
                    judged.accepted_chars as i64,
                    id as i64
                ],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Every exchange, oldest first, and how many records could not be read (written by a
    /// later version, or by hand).
    pub fn all(&self) -> std::io::Result<(Vec<Exchange>, usize)> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let read = || -> rusqlite::Result<(Vec<Exchange>, usize)> {
            let mut statement = connection
                .prepare("SELECT id, record, outcome, accepted_chars FROM exchanges ORDER BY id")?;
            let rows = statement.query_map([], |row| {
                let judged = judged_in(row, 2)?;
                Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?, judged))
            })?;
            let mut exchanges = Vec::new();
            let mut unreadable = 0;
            for row in rows {
                let (id, record, judged) = row?;
                match serde_json::from_str::<Exchange>(&record) {
                    Ok(exchange) => exchanges.push(Exchange {
                        id: id as u64,
                        judged,
                        ..exchange
                    }),
                    Err(_) => unreadable += 1,
                }
            }
            Ok((exchanges, unreadable))
        };
        read().map_err(|e| self.error(e))
    }

    /// The exchange numbered `id`, where the store still has it.
    pub fn get(&self, id: u64) -> std::io::Result<Option<Exchange>> {
        let connection = self.connection.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(key) = i64::try_from(id) else {
            return Ok(None);
        };
        let found: Option<(String, Option<Judged>)> = connection
            .query_row(
                "SELECT record, outcome, accepted_chars FROM exchanges WHERE id = ?1",
                [key],
                |row| Ok((row.get(0)?, judged_in(row, 1)?)),
            )
            .optional()
            .map_err(|e| self.error(e))?;
        let Some((record, judged)) = found else {
            return Ok(None);
        };
        let exchange: Exchange = serde_json::from_str(&record).map_err(|e| {
            std::io::Error::other(format!("recorded request {id} cannot be read: {e}"))
        })?;
        Ok(Some(Exchange {
            id,
            judged,
            ..exchange
        }))
    }

    fn error(&self, e: rusqlite::Error) -> std::io::Error {
        std::io::Error::other(format!(
            "record store {}: {e}",
            self.dir.join(DATABASE).display()
        ))
    }
}

/// The outcome a row holds in its `outcome` and `accepted_chars` columns, read from column
/// `at` on (an outcome a later version named otherwise reads as none).
fn judged_in(row: &rusqlite::Row, at: usize) -> rusqlite::Result<Option<Judged>> {
    let outcome: Option<String> = row.get(at)?;
    let chars: Option<i64> = row.get(at + 1)?;
    Ok(outcome
        .and_then(|o| Outcome::parse(&o))
        .map(|outcome| Judged {
            outcome,
            accepted_chars: usize::try_from(chars.unwrap_or(0)).unwrap_or(0),
        }))
}

/// The columns later versions added, each with the type it is added with: added once where a
/// store lacks them, in a transaction, so that two processes opening such a store at once add
/// each once. Records of earlier versions leave them NULL: they composed nothing and were in
/// no arm. `composed` says whose prompt went to the server (1: keyhole's; 0: the plugin's, as
/// sent); `arm` which arm of the A/B a request keyhole could compose for was in (`keyhole`,
/// `plugin`); `outcome` (`accepted`, `rejected`, `unknown`) and `accepted_chars` what became of
/// its completion, written once inferred. So an A/B is counted without reading records.
const ADDED_COLUMNS: [(&str, &str); 4] = [
    ("composed", "INTEGER"),
    ("arm", "TEXT"),
    ("outcome", "TEXT"),
    ("accepted_chars", "INTEGER"),
];

fn add_columns(connection: &mut Connection) -> rusqlite::Result<()> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for (name, kind) in ADDED_COLUMNS {
        let has: i64 = transaction.query_row(
            "SELECT COUNT(*) FROM pragma_table_info('exchanges') WHERE name = ?1",
            [name],
            |row| row.get(0),
        )?;
        if has == 0 {
            transaction.execute(
                &format!("ALTER TABLE exchanges ADD COLUMN {name} {kind}"),
                [],
            )?;
        }
    }
    transaction.commit()
}

/// Insert `record` (`exchange` as JSON) and delete the oldest others while the total is over
/// `max_bytes`.
fn append_within(
    connection: &mut Connection,
    exchange: &Exchange,
    record: &str,
    max_bytes: u64,
) -> rusqlite::Result<u64> {
    let composition = exchange.composition.as_ref();
    let composed = composition.map(Composition::composed);
    let arm = composition.and_then(|c| c.arm).map(|arm| arm.name());
    // IMMEDIATE: the write lock is taken at once, so two writers never both read the total.
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    transaction.execute(
        "INSERT INTO exchanges (at, bytes, record, composed, arm) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![exchange.at, record.len() as i64, record, composed, arm],
    )?;
    let id = transaction.last_insert_rowid();
    loop {
        let total: i64 = transaction.query_row("SELECT bytes FROM totals", [], |r| r.get(0))?;
        if total as u64 <= max_bytes {
            break;
        }
        let deleted = transaction.execute(
            "DELETE FROM exchanges WHERE id = (SELECT MIN(id) FROM exchanges WHERE id <> ?1)",
            [id],
        )?;
        if deleted == 0 {
            break;
        }
    }
    transaction.commit()?;
    Ok(id as u64)
}

/// Move the JSON-lines log at `path` (an earlier version's) into the store and rename it
/// `NAME.migrated`, kept whole: lines that cannot be read stay in it. Each exchange keeps its
/// id where that is free (two proxies once wrote the same ids; the later ones get new ids).
fn migrate(connection: &mut Connection, path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
        Ok(found) if !found.is_file() => {
            return Err(std::io::Error::other("not a file; move it away"));
        }
        Ok(_) => {}
    }
    let sql = |e: rusqlite::Error| std::io::Error::other(e.to_string());
    // IMMEDIATE: another process opening the store at the same time waits, then finds the
    // log already moved in.
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql)?;
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for line in BufReader::new(file).split(b'\n') {
        let Ok(exchange) = serde_json::from_slice::<Exchange>(&line?) else {
            continue;
        };
        let record = serde_json::to_string(&exchange).map_err(std::io::Error::other)?;
        let id = i64::try_from(exchange.id).ok().filter(|&id| id > 0);
        transaction
            .execute(
                "INSERT INTO exchanges (id, at, bytes, record) VALUES (
                    (SELECT ?1 WHERE NOT EXISTS (SELECT 1 FROM exchanges WHERE id = ?1)),
                    ?2, ?3, ?4)",
                params![id, exchange.at, record.len() as i64, record],
            )
            .map_err(sql)?;
    }
    let kept = migrated_name(path);
    std::fs::rename(path, &kept)?;
    private_file(&kept)?;
    if let Err(e) = transaction.commit() {
        // The log stays where the next open looks for it.
        let _ = std::fs::rename(&kept, path);
        return Err(sql(e));
    }
    Ok(())
}

/// `NAME.migrated`, or `NAME.migrated.2` and on where that is taken.
fn migrated_name(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    (1..)
        .map(|n| match n {
            1 => path.with_file_name(format!("{name}.migrated")),
            n => path.with_file_name(format!("{name}.migrated.{n}")),
        })
        .find(|candidate| !candidate.exists())
        .unwrap_or_else(|| path.with_file_name(format!("{name}.migrated")))
}

/// Create `dir` if needed and let only its owner in.
fn make_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Create `path` if needed, readable and writable by its owner only.
fn private_file(path: &Path) -> std::io::Result<()> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(0o600);
        options.open(path)?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    options.open(path)?;
    Ok(())
}

/// Every exchange recorded in `dir`, oldest first, and how many could not be read; none where
/// nothing was ever recorded there (nothing is created to say so).
pub fn read_log(dir: &Path) -> std::io::Result<(Vec<Exchange>, usize)> {
    let recorded = std::iter::once(DATABASE)
        .chain(OLD_LOGS)
        .any(|name| dir.join(name).exists());
    if !recorded {
        return Ok((Vec::new(), 0));
    }
    RecordStore::open(dir, DEFAULT_MAX_BYTES)?.all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(prompt: &str) -> Exchange {
        Exchange {
            id: 0,
            at: 0.0,
            client: "127.0.0.1:5000".into(),
            agent: None,
            method: "POST".into(),
            endpoint: "/infill".into(),
            upstream: "http://127.0.0.1:8080/".into(),
            status: 200,
            sent: Sent {
                prompt: Some(prompt.into()),
                ..Sent::default()
            },
            answered: Answered::default(),
            first_byte_ms: Some(1.0),
            total_ms: 2.0,
            ..Exchange::default()
        }
    }

    fn ids(dir: &Path) -> Vec<u64> {
        let (kept, unreadable) = read_log(dir).unwrap();
        assert_eq!(unreadable, 0);
        kept.iter().map(|e| e.id).collect()
    }

    #[test]
    fn a_store_of_an_earlier_version_gains_the_composed_column_and_keeps_its_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(DATABASE);
        {
            // The schema as #38 wrote it, with one record.
            let old = Connection::open(&path).unwrap();
            old.execute_batch(SCHEMA).unwrap();
            let record = serde_json::to_string(&exchange("old")).unwrap();
            old.execute(
                "INSERT INTO exchanges (at, bytes, record) VALUES (0, ?1, ?2)",
                params![record.len() as i64, record],
            )
            .unwrap();
        }
        let store = RecordStore::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        let composed = Exchange {
            composition: Some(crate::proxy::Composition {
                candidate: Some(3),
                ..Default::default()
            }),
            ..exchange("new")
        };
        let forwarded = Exchange {
            composition: Some(crate::proxy::Composition::forwarded("a chat request", 0.0)),
            ..exchange("chat")
        };
        store.append(&composed).unwrap();
        store.append(&forwarded).unwrap();
        drop(store);
        // Opened again (by a second process, say): the column is there once.
        let store = RecordStore::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        let connection = store.connection.lock().unwrap();
        let arms: Vec<Option<i64>> = connection
            .prepare("SELECT composed FROM exchanges ORDER BY id")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(arms, [None, Some(1), Some(0)]);
        drop(connection);
        // The A/B's columns too: an outcome is kept and read back.
        let judged = Judged {
            outcome: Outcome::Rejected,
            accepted_chars: 0,
        };
        store.set_judged(2, judged).unwrap();
        let (all, unreadable) = store.all().unwrap();
        assert_eq!((all.len(), unreadable), (3, 0));
        assert_eq!(all[1].composition, composed.composition);
        assert_eq!((all[0].judged, all[1].judged), (None, Some(judged)));
    }

    #[test]
    fn the_arm_is_kept_at_once_and_an_outcome_once_judged_and_both_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        let in_arm = |arm| Exchange {
            composition: Some(crate::proxy::Composition {
                arm: Some(arm),
                ..Default::default()
            }),
            ..exchange("p")
        };
        let keyhole = store
            .append(&in_arm(crate::proxy::arms::Arm::Keyhole))
            .unwrap();
        store
            .append(&in_arm(crate::proxy::arms::Arm::Plugin))
            .unwrap();
        store.append(&exchange("in no arm")).unwrap();
        let judged = Judged {
            outcome: Outcome::Accepted,
            accepted_chars: 12,
        };
        store.set_judged(keyhole, judged).unwrap();
        let connection = store.connection.lock().unwrap();
        let columns: Vec<(Option<String>, Option<String>)> = connection
            .prepare("SELECT arm, outcome FROM exchanges ORDER BY id")
            .unwrap()
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        drop(connection);
        let text = |s: &str| Some(s.to_string());
        assert_eq!(
            columns,
            [
                (text("keyhole"), text("accepted")),
                (text("plugin"), None),
                (None, None)
            ]
        );
        let (all, _) = store.all().unwrap();
        assert_eq!(all[0].judged, Some(judged));
        assert_eq!(all[1].judged, None);
        assert_eq!(store.get(keyhole).unwrap().unwrap().judged, Some(judged));
    }

    #[test]
    fn ids_go_on_across_reopening_and_the_limit_deletes_the_oldest() {
        let dir = tempfile::tempdir().unwrap();
        let one = serde_json::to_string(&exchange("p00")).unwrap().len() as u64;
        let store = RecordStore::open(dir.path(), 5 * one).unwrap();
        for i in 0..4 {
            assert_eq!(store.append(&exchange(&format!("p{i:02}"))).unwrap(), i + 1);
        }
        drop(store);
        let store = RecordStore::open(dir.path(), 5 * one).unwrap();
        for i in 4..12 {
            assert_eq!(store.append(&exchange(&format!("p{i:02}"))).unwrap(), i + 1);
        }
        // Bounded: the five newest, in order; the deleted ids are not handed out again.
        assert_eq!(ids(dir.path()), [8, 9, 10, 11, 12]);
        assert_eq!(store.get(12).unwrap().unwrap().sent.prompt.unwrap(), "p11");
        assert_eq!(store.get(3).unwrap(), None);
    }

    #[test]
    fn two_stores_on_one_directory_share_ids_and_the_limit_keeps_both_writers_records() {
        let dir = tempfile::tempdir().unwrap();
        let one = serde_json::to_string(&exchange("a-00")).unwrap().len() as u64;
        let (a, b) = (
            RecordStore::open(dir.path(), 40 * one).unwrap(),
            RecordStore::open(dir.path(), 40 * one).unwrap(),
        );
        let given: Vec<u64> = std::thread::scope(|scope| {
            let writers = [(&a, "a"), (&b, "b")].map(|(store, who)| {
                scope.spawn(move || {
                    (0..100)
                        .map(|i| store.append(&exchange(&format!("{who}-{i:02}"))).unwrap())
                        .collect::<Vec<u64>>()
                })
            });
            writers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        // 200 appends, 200 distinct ids; the newest 40 kept.
        let distinct: std::collections::BTreeSet<u64> = given.iter().copied().collect();
        assert_eq!(distinct.len(), 200);
        assert_eq!(ids(dir.path()), (161..=200).collect::<Vec<u64>>());
        // Each writer's deletions keep the other's newest records.
        for i in 0..20 {
            a.append(&exchange(&format!("a-{i:02}"))).unwrap();
            b.append(&exchange(&format!("b-{i:02}"))).unwrap();
        }
        let (kept, _) = read_log(dir.path()).unwrap();
        let by = |who: &str| {
            kept.iter()
                .filter(|e| e.sent.prompt.as_deref().unwrap().starts_with(who))
                .count()
        };
        assert_eq!((by("a"), by("b")), (20, 20));
    }

    #[test]
    fn an_exchange_over_its_cap_is_refused_and_leaves_the_history() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::open(dir.path(), 4000).unwrap();
        store.append(&exchange("kept")).unwrap();
        let error = store.append(&exchange(&"x".repeat(2000))).unwrap_err();
        assert!(error.to_string().contains("over the 1000"), "{error}");
        assert_eq!(ids(dir.path()), [1]);
    }

    #[test]
    fn old_logs_move_in_with_their_ids_and_are_kept_renamed() {
        let dir = tempfile::tempdir().unwrap();
        let line = |id: u64, prompt: &str| {
            let mut e = exchange(prompt);
            e.id = id;
            serde_json::to_string(&e).unwrap() + "\n"
        };
        std::fs::write(dir.path().join(OLD_LOGS[0]), line(3, "older")).unwrap();
        // Two proxies once wrote id 4 twice; a crash cut a line.
        let current = line(4, "first four") + &line(4, "second four") + "{\"id\": 9, \"at\"";
        std::fs::write(dir.path().join(OLD_LOGS[1]), &current).unwrap();
        let store = RecordStore::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        let (kept, _) = store.all().unwrap();
        let read: Vec<(u64, String)> = kept
            .iter()
            .map(|e| (e.id, e.sent.prompt.clone().unwrap()))
            .collect();
        assert_eq!(read[..2], [(3, "older".into()), (4, "first four".into())]);
        assert_eq!(read[2].1, "second four");
        assert!(read[2].0 > 4);
        // Nothing lost: the old file is there whole, under its new name; and no new id is one
        // the old log used.
        let kept_log = dir.path().join("exchanges.jsonl.migrated");
        assert_eq!(std::fs::read_to_string(&kept_log).unwrap(), current);
        assert!(!dir.path().join(OLD_LOGS[1]).exists());
        assert!(store.append(&exchange("new")).unwrap() > read[2].0);
        // Opened again, nothing is moved in twice.
        drop(store);
        assert_eq!(read_log(dir.path()).unwrap().0.len(), 4);
    }

    #[cfg(unix)]
    #[test]
    fn the_store_is_for_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("proxy");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let store = RecordStore::open(&dir, DEFAULT_MAX_BYTES).unwrap();
        store.append(&exchange("private")).unwrap();
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            assert_eq!(mode(&path), 0o600, "{}", path.display());
        }
    }

    #[test]
    fn a_store_that_cannot_be_opened_is_one_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(DATABASE)).unwrap();
        let error = read_log(dir.path()).unwrap_err().to_string();
        assert!(error.contains(DATABASE), "{error}");
        assert_eq!(error.lines().count(), 1, "{error}");
    }

    #[test]
    fn a_record_a_later_version_wrote_is_counted_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let store = RecordStore::open(dir.path(), DEFAULT_MAX_BYTES).unwrap();
        store.append(&exchange("whole")).unwrap();
        let connection = Connection::open(dir.path().join(DATABASE)).unwrap();
        connection
            .execute(
                "INSERT INTO exchanges (at, bytes, record) VALUES (0, 3, 'odd')",
                [],
            )
            .unwrap();
        store.append(&exchange("after")).unwrap();
        let (kept, unreadable) = store.all().unwrap();
        assert_eq!((kept.len(), unreadable), (2, 1));
        assert_eq!(kept[1].id, 3);
    }
}
