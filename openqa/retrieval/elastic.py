"""Elasticsearch as a retrieval engine: the engine for corpora beyond one machine.

The index is created with explicit settings: one shard unless told otherwise, a ``whitespace``
analyzer over text pre-tokenized by this project's tokenizer (the same terms as the custom and
Lucene indexes), and a named BM25 similarity with the given k1 and b. Documents carry their row
in the paragraph store as ``_id``. The local folder keeps the manifest (server, index name,
settings, corpus checksum) and the paragraph store; each build loads a fresh index on the
server and switches the manifest to it only when loading succeeded, so a failed build leaves the
previous index in use.

Faults are one-line errors naming the server: a malformed URL before anything is sent, a server
that does not answer the first ping, and one that stops answering (refused, reset, timed out)
or refuses a request while loading or searching.
"""

from __future__ import annotations

import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, cast
from urllib.parse import urlsplit

from openqa.corpus.paragraphs import Paragraph
from openqa.errors import OpenQAError
from openqa.languages import language
from openqa.progress import tqdm
from openqa.retrieval.base import PARAGRAPHS, EngineOptions, Hit, Opening, ParagraphStore, SearchEngine, StoreWriter
from openqa.retrieval.lucene import LuceneParams, pretokenized
from openqa.retrieval.manifest import atomic_folder, read_manifest, rebuild, write_manifest
from openqa.text.tokenize import Tokenizer, make_tokenizer

SIMILARITY = "openqa_bm25"
CHUNK = 1000
#: A request's limit. Refused or reset connections are retried RETRIES times; a request that timed
#: out is not, so a server that hangs costs one TIMEOUT_S before the error, not RETRIES + 1 of them.
TIMEOUT_S = 60
RETRIES = 3
#: The first ping's limit: a server that is there answers at once; a wrong address must not hang.
PING_TIMEOUT_S = 5
URL_FORM = "http://host:9200 (or https://host:port)"


def check_url(url: str | None) -> None:
    """Refuse a missing server URL or one the client cannot use, saying what is wrong and the expected form."""
    if not url:
        raise OpenQAError(f"no Elasticsearch server: pass --es-url or set OPENQA_ES_URL (e.g. {URL_FORM})")
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        problem = "its port is not a number from 1 to 65535"
    else:
        if parts.scheme not in ("http", "https"):
            problem = "it does not start with http:// or https://"
        elif not parts.hostname:
            problem = "it names no host"
        elif not port:
            problem = "it names no port"
        else:
            return
    raise OpenQAError(f"bad Elasticsearch URL {url!r}: {problem}; expected {URL_FORM} in --es-url or OPENQA_ES_URL")


def connect(url: str | None) -> Any:
    """An ``Elasticsearch`` client for ``url`` that has answered a ping, or a one-line error."""
    check_url(url)
    assert url is not None  # check_url refuses a missing URL
    from elasticsearch import Elasticsearch

    client = Elasticsearch(url.strip(), request_timeout=TIMEOUT_S, max_retries=RETRIES, retry_on_timeout=False)
    if not _reachable(client):
        raise OpenQAError(f"cannot reach Elasticsearch at {url}: start the server or fix --es-url / OPENQA_ES_URL")
    return client


def _reachable(client: Any) -> bool:
    try:
        return bool(client.options(request_timeout=PING_TIMEOUT_S, max_retries=0).ping())
    except Exception:  # the client raises transport errors of several kinds for a dead server
        return False


@contextmanager
def server_errors(url: str | None, doing: str) -> Iterator[None]:
    """Turn the client's errors while ``doing`` something into one-line errors naming the server.

    Transport errors (refused, reset, timed out) come after the client's own retries, so the
    server has stopped answering; API errors are the server refusing the request.
    """
    from elasticsearch import ApiError, TransportError

    try:
        yield
    except TransportError as exc:
        raise OpenQAError(
            f"Elasticsearch at {url} stopped answering while {doing} ({type(exc).__name__}): "
            "check that the server is up, then run the command again"
        ) from None
    except ApiError as exc:
        raise OpenQAError(f"Elasticsearch at {url} refused a request while {doing}: {exc.meta.status} {exc.message}") from None


def index_body(params: LuceneParams, shards: int = 1) -> dict[str, Any]:
    """Settings and mappings of a paragraph index: whitespace analysis, our BM25 parameters."""
    return {
        "settings": {
            "number_of_shards": shards,
            "similarity": {SIMILARITY: {"type": "BM25", "k1": params.k1, "b": params.b}},
        },
        "mappings": {
            "properties": {
                "contents": {"type": "text", "analyzer": "whitespace", "similarity": SIMILARITY},
                "pid": {"type": "keyword", "index": False},
                "book": {"type": "keyword"},
            }
        },
    }


class ElasticBM25(SearchEngine):
    """BM25 search on an Elasticsearch cluster behind the common engine interface."""

    name = "elasticsearch"
    extra = "elasticsearch"
    summary = "an Elasticsearch cluster (with --es-url), for ir-es"
    #: Queries sent in one multi-search request.
    query_batch = 64

    def __init__(self, folder: Path, manifest: dict[str, Any], client: Any, url: str | None, paragraphs: ParagraphStore) -> None:
        self.folder = folder
        self.manifest = manifest
        self.client = client
        self.url = url
        self.tokenizer = make_tokenizer(manifest["tokenizer"])
        self.paragraphs = paragraphs
        self.index_name = manifest["es_index"]

    @classmethod
    def check_options(cls, options: EngineOptions) -> None:
        """A server URL must be given and well formed."""
        check_url(options.connection)

    @classmethod
    def build(
        cls, folder: Path, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer, corpus: dict[str, Any],
        options: EngineOptions = EngineOptions(), client: Any = None,
    ) -> None:
        """Create a fresh server index, bulk-load the stream of paragraphs (writing the local paragraph
        store as they pass), then switch the local manifest to it."""
        config = tokenizer.config()
        if language(config["lang"]).spaced and config.get("ngram", 1) > 1:
            raise OpenQAError("the Elasticsearch engine indexes single words: build it without --ngram 2 for English")
        client = client or connect(options.connection)
        params = LuceneParams()
        name = f"openqa-{config['lang']}-{corpus.get('corpus_checksum', 'corpus')[:12]}-{time.time_ns()}"
        previous = _previous_index(folder)
        with atomic_folder(folder) as scratch:
            body = index_body(params)
            store = StoreWriter(scratch / PARAGRAPHS)
            with server_errors(options.connection, f"loading paragraphs into index {name}"):
                client.indices.create(index=name, settings=body["settings"], mappings=body["mappings"])
                try:
                    _bulk_load(client, name, store.passing(paragraphs), tokenizer)
                    client.indices.refresh(index=name)
                except BaseException:
                    _drop_half_loaded(client, name)
                    raise
            write_manifest(
                scratch,
                {"engine": cls.name, **corpus, "tokenizer": config, "paragraphs": store.rows,
                 "es_url": options.connection, "es_index": name, "bm25": {"k1": params.k1, "b": params.b},
                 "analysis": "pre-tokenized by openqa, whitespace analyzer"},
            )
        if previous and previous != name:
            with server_errors(options.connection, f"deleting the replaced index {previous}"):
                client.indices.delete(index=previous, ignore_unavailable=True)

    @classmethod
    def rebuild_command(cls, build_hint: str, options: EngineOptions, manifest: dict[str, Any] | None) -> str:
        """The build command with the server it needs (``options.connection``, else the recorded one)."""
        url = options.connection or (manifest or {}).get("es_url")
        return f"{build_hint} --es-url {url or 'URL'}"

    @classmethod
    def open(cls, at: Opening, client: Any = None, **parts: Any) -> "ElasticBM25":
        """Connect to the index's server (``options.connection`` overrides the recorded URL); the
        server index must still be there and hold one document per paragraph of the store."""
        url = at.options.connection or at.manifest.get("es_url")
        client = client or connect(url)
        name = at.manifest.get("es_index")
        with server_errors(url, "opening the index"):
            exists = client.indices.exists(index=name)
            documents = int(client.count(index=name)["count"]) if exists else 0
        if not exists:
            raise OpenQAError(f"Elasticsearch index {name} is gone from {url}; {rebuild(at.hint)}")
        at.at_most_paragraphs(f"server index {name}", documents)
        assert at.store is not None  # the engine stores paragraphs: load opened the store
        return cls(at.folder, at.manifest, client, url, at.store)

    def search_batch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """One multi-search request for the batch (up to ``query_batch`` queries)."""
        tok = self.tokenizer
        searches: list[dict[str, Any]] = []
        for q in queries:
            searches += [{"index": self.index_name},
                         {"query": {"match": {"contents": pretokenized(tok, tok.prepare_query(q))}}, "size": k, "_source": False}]
        with server_errors(self.url, "searching"):
            responses = self.client.msearch(searches=searches)["responses"]
        out = []
        for response in responses:
            if "error" in response:
                raise OpenQAError(f"Elasticsearch search failed: {response['error']}")
            out.append([Hit(int(h["_id"]), float(h["_score"])) for h in response["hits"]["hits"]])
        return out


def _previous_index(folder: Path) -> str | None:
    """The server index the current local manifest points at, if any."""
    try:
        return cast("str | None", read_manifest(folder, "")["es_index"])
    except (OpenQAError, KeyError):
        return None


def _drop_half_loaded(client: Any, name: str) -> None:
    """Delete a server index whose loading failed; best effort, as the server may be what failed."""
    from elasticsearch import ApiError, TransportError

    with suppress(ApiError, TransportError):
        client.indices.delete(index=name, ignore_unavailable=True)


def _bulk_load(client: Any, name: str, paragraphs: Iterable[Paragraph], tokenizer: Tokenizer) -> None:
    """Stream the paragraphs to the server as they are read, in chunks of ``CHUNK``, with retries,
    and a progress bar."""
    from elasticsearch.helpers import streaming_bulk

    def actions() -> Iterator[dict[str, Any]]:
        for row, p in enumerate(paragraphs):
            yield {"_index": name, "_id": str(row), "contents": pretokenized(tokenizer, p.text), "pid": p.pid, "book": p.book}

    with tqdm(desc="bulk loading (elasticsearch)", unit="para") as bar:
        for ok, item in streaming_bulk(client, actions(), chunk_size=CHUNK, max_retries=RETRIES, raise_on_error=False):
            if not ok:
                raise OpenQAError(f"Elasticsearch refused a paragraph: {item}")
            bar.update()
