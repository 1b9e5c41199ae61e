"""Language models: a client for any OpenAI-compatible chat endpoint, the prompts KLineage sends, and the parsing
of what comes back.

The client is the official `openai` SDK pointed at a base URL, so a local vLLM, llama.cpp or ollama server works as
well as a hosted API. Configuration comes from `LLMConfig.from_env` (KLINEAGE_LLM_BASE_URL, KLINEAGE_LLM_MODEL,
KLINEAGE_LLM_API_KEY or OPENAI_API_KEY, ...). Every call has a timeout and a bounded number of retries, and is
counted: calls, prompt and completion tokens (as the server reports them; never estimated), transport failures,
replies rejected before the gates (by reason). `Usage` is the frozen record of that accounting that trajectories and
reports carry. Caps on calls and tokens make the model part of a run's budget.

What a model writes is a candidate like any other: it goes through the same gates. Before that, `parse_program`
rejects what cannot be a program at all (no code block, a syntax error, no `class ModelNew`, a kernel renamed or
removed, an unchanged program, an endless reply) as a counted failure value, never an exception.

Prompts: `materialize_messages` (apply a skill card to a program at a site), `repair_messages` (fix a candidate
that failed a gate, given the verdict), `simplify_messages` (mining: undo one optimization the mechanical catalog
does not know, stating its intent and the predicates that might matter; probing decides which do)."""

from __future__ import annotations

import ast
import os
import re
import time
from dataclasses import asdict, dataclass, field

from klineage.skills import Skill, card
from klineage.transform import CONDITIONS
from klineage.workload import UserError, normalized_source

DEFAULT_TIMEOUT_S = 180.0
DEFAULT_RETRIES = 2
DEFAULT_REPLY_TOKENS = 8192
MAX_REPLY_CHARS = 60_000  # a reply longer than this is an endless one: rejected, not parsed
LOCAL_KEY = "not-needed"  # local servers (vLLM, llama.cpp, ollama) ignore the key; the SDK insists on one


def _require_openai():
    try:
        import openai
    except ImportError:
        raise UserError("the llm materializer needs the openai package: pip install 'klineage[agents]'") from None
    return openai


@dataclass(frozen=True)
class LLMConfig:
    """Where the model is and how patiently to talk to it."""

    model: str
    base_url: str | None = None  # None: the SDK's default (OPENAI_BASE_URL or api.openai.com)
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES  # further attempts after a transport failure, rate limit or server error
    backoff_s: float = 2.0  # first wait between attempts; doubled each time
    temperature: float | None = 0.0
    reply_tokens: int = DEFAULT_REPLY_TOKENS  # max_tokens per reply
    max_reply_chars: int = MAX_REPLY_CHARS

    @staticmethod
    def from_env(**overrides) -> LLMConfig:
        env = os.environ
        values: dict = {
            "model": env.get("KLINEAGE_LLM_MODEL"),
            "base_url": env.get("KLINEAGE_LLM_BASE_URL") or None,
            "api_key": env.get("KLINEAGE_LLM_API_KEY") or env.get("OPENAI_API_KEY") or None,
        }
        for key, name, cast in (
            ("timeout_s", "KLINEAGE_LLM_TIMEOUT", float),
            ("retries", "KLINEAGE_LLM_RETRIES", int),
            ("reply_tokens", "KLINEAGE_LLM_REPLY_TOKENS", int),
            ("temperature", "KLINEAGE_LLM_TEMPERATURE", float),
        ):
            if env.get(name):
                try:
                    values[key] = cast(env[name])
                except ValueError:
                    raise UserError(f"{name}={env[name]!r}: expected a number") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        if not values.get("model"):
            raise UserError(
                "no model configured: set KLINEAGE_LLM_MODEL (and KLINEAGE_LLM_BASE_URL for a local or "
                "other OpenAI-compatible server; see docs/AGENTS.md)"
            )
        if not values.get("api_key"):
            if not values.get("base_url"):
                raise UserError(
                    "no API key: set KLINEAGE_LLM_API_KEY or OPENAI_API_KEY, or KLINEAGE_LLM_BASE_URL for "
                    "a local server"
                )
            values["api_key"] = LOCAL_KEY
        return LLMConfig(**values)


@dataclass(frozen=True)
class Usage:
    """What a run spent on the model, as reported by the server."""

    model: str
    base_url: str | None
    calls: int = 0  # requests that got a reply
    failed_calls: int = 0  # requests that got none after every retry
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls_without_usage: int = 0  # replies whose server reported no token counts (counted as 0, never estimated)
    rejected: dict = field(default_factory=dict)  # reason -> replies rejected before or by the gates
    max_calls: int | None = None
    max_tokens: int | None = None
    capped: str = ""  # why the cap stopped further calls, if it did

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def as_dict(self) -> dict:
        return {**asdict(self), "tokens": self.tokens}

    def line(self) -> str:
        """One sentence for a report."""
        caps = [
            f"{self.max_calls} calls" if self.max_calls else "",
            f"{self.max_tokens} tokens" if self.max_tokens else "",
        ]
        caps_text = " and ".join(c for c in caps if c)
        rejected = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        text = (
            f"Model `{self.model}`" + (f" at {self.base_url}" if self.base_url else "") + f": {self.calls} calls, "
            f"{self.prompt_tokens} prompt + {self.completion_tokens} completion tokens ({self.tokens} in all)"
            + (f", {self.failed_calls} failed calls" if self.failed_calls else "")
            + (f", {self.retries} retries" if self.retries else "")
            + (f", {self.calls_without_usage} replies without token counts" if self.calls_without_usage else "")
            + (f"; caps {caps_text}" if caps_text else "")
            + f"; replies rejected: {rejected}."
        )
        if self.capped:
            text += f" Stopped asking: {self.capped}."
        return text


def usage_line(usage: dict) -> str:
    """The report's sentence for a `Usage.as_dict()` record."""
    return Usage(**{k: v for k, v in usage.items() if k != "tokens"}).line()


@dataclass(frozen=True)
class Reply:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


@dataclass(frozen=True)
class Failure:
    """A call or a reply that gave no usable program. `reason` is a stable code (counted in `Usage.rejected`)."""

    reason: str  # no_reply | capped | too_long | no_code_block | syntax_error | no_model_new | kernel_renamed | ...
    detail: str = ""


class LLMClient:
    """A chat client with timeouts, bounded retries, caps and accounting. `chat` never raises for the endpoint's
    problems: a request that gets no reply after every retry is a `Failure`."""

    def __init__(self, config: LLMConfig, max_calls: int | None = None, max_tokens: int | None = None, sdk=None):
        self.config = config
        self.max_calls, self.max_tokens = max_calls, max_tokens
        if sdk is None:
            openai = _require_openai()
            sdk = openai.OpenAI(
                base_url=config.base_url, api_key=config.api_key, timeout=config.timeout_s, max_retries=0
            )
        self.sdk = sdk
        self._counts = {
            "calls": 0,
            "failed_calls": 0,
            "retries": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "calls_without_usage": 0,
        }
        self._rejected: dict[str, int] = {}
        self._capped = ""

    @property
    def usage(self) -> Usage:
        return Usage(
            self.config.model,
            self.config.base_url,
            **self._counts,
            rejected=dict(self._rejected),
            max_calls=self.max_calls,
            max_tokens=self.max_tokens,
            capped=self._capped,
        )

    def reject(self, reason: str) -> None:
        """Count a reply that did not become a candidate (`ask_program`) or whose candidate failed a gate (callers)."""
        self._rejected[reason] = self._rejected.get(reason, 0) + 1

    def exhausted(self) -> str:
        """Why no further call may be made ("" while the caps allow one); the reason is kept in `Usage.capped`."""
        spent = self._counts["prompt_tokens"] + self._counts["completion_tokens"]
        if self.max_calls is not None and self._counts["calls"] + self._counts["failed_calls"] >= self.max_calls:
            self._capped = f"the cap of {self.max_calls} model calls is reached"
        elif self.max_tokens is not None and spent >= self.max_tokens:
            self._capped = f"the cap of {self.max_tokens} tokens is reached ({spent} spent)"
        return self._capped

    def chat(self, messages: list[dict]) -> Reply | Failure:
        if why := self.exhausted():
            return Failure("capped", why)
        openai = _require_openai()
        transient = (
            openai.APIConnectionError,
            openai.APITimeoutError,
            openai.RateLimitError,
            openai.InternalServerError,
        )
        wait = self.config.backoff_s
        error = ""
        for attempt in range(self.config.retries + 1):
            if attempt:
                self._counts["retries"] += 1
                time.sleep(wait)
                wait *= 2
            try:
                kwargs = {"max_tokens": self.config.reply_tokens}
                if self.config.temperature is not None:
                    kwargs["temperature"] = self.config.temperature
                response = self.sdk.chat.completions.create(model=self.config.model, messages=messages, **kwargs)
            except transient as e:
                error = f"{type(e).__name__}: {str(e)[:200]}"
                continue
            except openai.APIStatusError as e:  # 4xx other than 429: retrying will not help
                error = f"{type(e).__name__} {e.status_code}: {str(e)[:200]}"
                break
            except openai.OpenAIError as e:
                error = f"{type(e).__name__}: {str(e)[:200]}"
                break
            return self._account(response)
        self._counts["failed_calls"] += 1
        return Failure("no_reply", error)

    def _account(self, response) -> Reply | Failure:
        self._counts["calls"] += 1
        usage = getattr(response, "usage", None)
        if usage is None:
            self._counts["calls_without_usage"] += 1
            prompt = completion = 0
        else:
            prompt, completion = int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)
        self._counts["prompt_tokens"] += prompt
        self._counts["completion_tokens"] += completion
        choices = getattr(response, "choices", None) or []
        if not choices or choices[0].message is None or not choices[0].message.content:
            return Failure("empty_reply", "the reply has no text")
        return Reply(choices[0].message.content, prompt, completion, choices[0].finish_reason or "")


# --- parsing -----------------------------------------------------------------------------------------------------

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:\n[ \t]*```|\Z)", re.S)


@dataclass(frozen=True)
class Parsed:
    source: str
    intent: str = ""
    conditions: tuple[str, ...] = ()


def code_block(text: str) -> str | None:
    """The last ```python block (a bare ``` block where none is labelled; local models often omit the label)."""
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(text)]
    labelled = [body for lang, body in blocks if lang in ("python", "py", "python3")]
    bare = [body for lang, body in blocks if not lang]
    chosen = labelled or bare
    return chosen[-1] if chosen else None


def kernel_names(source: str) -> set[str]:
    """Module-level functions decorated with a Triton jit (directly or under autotune/heuristics)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list)
    }


def _field(text: str, name: str) -> str:
    match = re.search(rf"^\s*\**{name}\**\s*:\s*(.+)$", text, re.M | re.I)
    return match.group(1).strip().strip("*").strip() if match else ""


def parse_program(
    reply: Reply | Failure, original: str, main: bool = True, max_chars: int = MAX_REPLY_CHARS
) -> Parsed | Failure:
    """The new source of one module from a model's reply, or why there is none. `main`: the module is the program's
    main file (it must define `class ModelNew`). Every kernel of `original` must still be defined under its name."""
    if isinstance(reply, Failure):
        return reply
    text = reply.text
    if len(text) > max_chars:
        return Failure("too_long", f"{len(text)} characters (cap {max_chars})")
    if reply.finish_reason == "length":
        return Failure("too_long", "the reply was cut at the token limit (an endless or unfinished answer)")
    source = code_block(text)
    if source is None:
        return Failure("no_code_block", "no ```python block in the reply")
    source = source.strip("\n") + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return Failure("syntax_error", f"line {e.lineno}: {e.msg}")
    if main and not any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body):
        return Failure("no_model_new", "the program defines no class ModelNew")
    missing = sorted(kernel_names(original) - kernel_names(source))
    if missing:
        return Failure("kernel_renamed", f"kernel(s) {', '.join(missing)} no longer defined")
    if normalized_source(source) == normalized_source(original):
        return Failure("unchanged", "the reply repeats the program")
    named = [c.strip(" `.") for c in re.split(r"[,\s]+", _field(text, "CONDITIONS"))]
    return Parsed(source, _field(text, "INTENT")[:300], tuple(c for c in named if c in CONDITIONS))


# --- prompts -----------------------------------------------------------------------------------------------------

SYSTEM = """You are an expert Triton GPU-kernel engineer. You edit one Python module of a KernelBench-style program:
the main module defines `class ModelNew(torch.nn.Module)` whose `forward` allocates outputs and launches
`@triton.jit` kernels. Rules that every answer must follow (an automatic checker enforces them):
- keep `class ModelNew`, its constructor arguments and its `forward` signature;
- keep every existing `@triton.jit` kernel under its name (you may add kernels);
- inside `forward` use PyTorch only to allocate, view, copy and cast; all arithmetic runs in Triton kernels;
- the program must compute the same outputs as before on every input in the workload's domain.
Answer with a line `INTENT: <one line>` and then the complete new source of the module in one ```python block."""


def _program_block(module: str, source: str) -> str:
    return f"Module `{module}`:\n\n```python\n{source.rstrip()}\n```"


def _domain_text(domain: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in domain.items()) or "the workload's cases only"


def materialize_messages(
    guidance: str, module: str, source: str, site: str, domain: dict, decided: tuple[str, ...] = ()
) -> list[dict]:
    """Apply one piece of guidance (a skill card, or a remembered note) to a program at a site."""
    decided_text = "\n".join(f"- {d}" for d in decided) or "- none recorded"
    user = (
        f"Apply this optimization to the program.\n\n## Optimization\n\n{guidance.strip()}\n\n## Program\n\n"
        f"{_program_block(module, source)}\n\n## Where\n\n{site}\n\n## Input domain the program must handle\n\n"
        f"{_domain_text(domain)}\n\n## Conditions checked against this domain\n\n{decided_text}\n\n"
        "Where a condition holds on part of the domain only, keep the original path as a fallback and dispatch "
        "between the two at launch. Reply with `INTENT:` and the complete new module in one ```python "
        "block."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def skill_guidance(skill: Skill) -> str:
    return card(skill)


def repair_messages(module: str, source: str, gate: str, code: str, reason: str, what: str = "") -> list[dict]:
    """Fix a candidate that failed a gate, keeping the optimization it tried."""
    what = f" ({what})" if what else ""
    user = (
        f"This candidate{what} failed the {gate} gate with `{code}`:\n\n{reason.strip()[:1500]}\n\n"
        f"{_program_block(module, source)}\n\nFix the failure while keeping the optimization. Reply with "
        "`INTENT:` and the complete corrected module in one ```python block."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def simplify_messages(module: str, source: str, undone: list[str], tried: list[str]) -> list[dict]:
    """Mining: undo one optimization that the mechanical catalog did not undo."""
    vocabulary = "\n".join(f"- `{k}`: {v}" for k, v in CONDITIONS.items())
    undone_text = ", ".join(sorted(set(undone))) or "none"
    tried_text = "\n".join(f"- {t}" for t in tried) or "- none"
    user = (
        f"The program below is an expert's optimized Triton program, already simplified by a mechanical catalog "
        f"(families undone: {undone_text}). Undo exactly ONE remaining optimization: rewrite it into the simplest "
        "straightforward form that computes the same outputs (for example a two-pass reduction instead of an "
        "online one, one tile instead of a loop over tiles, a plain loop instead of a fused epilogue).\n\n"
        f"{_program_block(module, source)}\n\nAlready tried (do not repeat):\n{tried_text}\n\nReply with:\n"
        "INTENT: <what the optimization you undid buys, in the optimize direction, one line>\n"
        "CONDITIONS: <comma-separated predicates from the list below that the optimization may depend on>\n"
        f"and the complete simplified module in one ```python block. Predicates:\n{vocabulary}\n\n"
        "If nothing is left to undo, reply with the single word NONE."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def ask_program(client: LLMClient, messages: list[dict], original: str, main: bool = True) -> Parsed | Failure:
    """One call and its parse; every failure but the cap is counted in the client's `rejected`."""
    reply = client.chat(messages)
    parsed = parse_program(reply, original, main, client.config.max_reply_chars)
    if isinstance(parsed, Failure) and parsed.reason != "capped":
        client.reject(parsed.reason)
    return parsed


def says_none(reply: Reply | Failure) -> bool:
    return isinstance(reply, Reply) and reply.text.strip().strip(".`*").upper() == "NONE"


__all__ = [
    "Failure",
    "ask_program",
    "LLMClient",
    "LLMConfig",
    "Parsed",
    "Reply",
    "Usage",
    "code_block",
    "kernel_names",
    "materialize_messages",
    "parse_program",
    "repair_messages",
    "says_none",
    "simplify_messages",
    "skill_guidance",
    "usage_line",
]
