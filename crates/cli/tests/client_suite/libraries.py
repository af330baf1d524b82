# The client-compatibility suite's higher-level Python libraries (issue 33), run from
# crates/cli/tests/client_suite.rs in the separate venv `$RIPCORD_CACHE/venv-clients`.
# One process per library: it reads a feature name per line on stdin (the test scripts the
# fake vendors before each line), runs it, and prints one JSON line:
#   {"ok": true|false|null, ...}   (null: the library has no such feature, "—" in the matrix)
import json, os, sys, traceback

url, client = sys.argv[1], sys.argv[2]
schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
weather = {"type": "function", "function": {"name": "weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
hi = [{"role": "user", "content": "Say hi"}]
ask = [{"role": "user", "content": "Weather in Oslo?"}]
HELLO = "Hello from ripcord"

from pydantic import BaseModel

class Place(BaseModel):
    city: str


def langchain_features(llm, text_of, model_of, add_usage, server_error, embeddings):
    """The features of a LangChain chat model `llm`: `text_of` reads a message's text,
    `model_of` the serving model from response metadata, `add_usage` folds a chunk's output
    tokens into the total; `server_error` is the SDK's 5xx class."""
    from langchain_core.messages import ToolMessage

    def chat():
        r = llm.invoke("Say hi")
        return r.content == HELLO, {"text": r.content}

    def stream():
        text, usage = "", 0
        for ch in llm.stream("Say hi"):
            text += text_of(ch)
            if ch.usage_metadata:
                usage = add_usage(usage, ch.usage_metadata["output_tokens"])
        return text == HELLO and usage > 0, {"text": text, "usage": usage}

    def tools():
        bound = llm.bind_tools([weather])
        first = None
        for ch in bound.stream(ask):
            first = ch if first is None else first + ch
        calls = first.tool_calls
        second = bound.invoke(ask + [first, ToolMessage(content="-3C", tool_call_id=calls[0]["id"])])
        text = text_of(second)
        ok = calls[0]["name"] == "weather" and calls[0]["args"] == {"city": "Oslo"} and text == "It is sunny"
        return ok, {"calls": calls, "second": text}

    def structured():
        r = llm.with_structured_output(Place, method="json_schema").invoke("Where?")
        return r.city == "Oslo", {"object": r.model_dump()}

    def retries():
        try:
            llm.invoke("Say hi")
            return False, {"error": "answered"}
        except server_error as e:
            return True, {"error": type(e).__name__}

    def fallback():
        r = llm.invoke("Say hi")
        models = {model_of(r.response_metadata)}
        for ch in llm.stream("Say hi"):
            m = model_of(ch.response_metadata)
            if m:
                models.add(m)
        return models == {"gpt-4o-mini"}, {"models": sorted(map(str, models))}

    return {"chat": chat, "stream": stream, "tools": tools, "structured": structured,
            "embeddings": embeddings, "retries": retries, "fallback": fallback}


def langchain_openai_features():
    import openai
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    llm = ChatOpenAI(model="ripcord", base_url=url + "/v1", api_key="k", stream_usage=True)

    def embeddings():
        # LangChain's default (check_embedding_ctx_length) tokenizes with tiktoken, whose
        # encodings are downloaded from the internet, which the tests may not reach: plain strings.
        e = OpenAIEmbeddings(model="text-embedding-3-small", base_url=url + "/v1", api_key="k",
                             check_embedding_ctx_length=False)
        v = e.embed_documents(["alpha", "beta"])
        q = e.embed_query("alpha")
        return len(v) == 2 and len(v[0]) > 1 and v[0] == q, {"head": v[0][:3]}

    # The last chunk with usage carries the total.
    return langchain_features(llm, lambda m: m.content, lambda meta: meta.get("model_name"),
                              lambda total, n: n, openai.InternalServerError, embeddings)


def langchain_anthropic_features():
    import anthropic
    from langchain_anthropic import ChatAnthropic
    llm = ChatAnthropic(model="claude-sonnet-4-5", base_url=url, api_key="k", max_tokens=64)

    def text_of(m):
        return m.text if isinstance(m.text, str) else m.text()

    def model_of(meta):
        return meta.get("model_name") or meta.get("model")

    # Each chunk with usage carries its own share.
    return langchain_features(llm, text_of, model_of, lambda total, n: total + n,
                              anthropic.InternalServerError, lambda: (None, {}))


def litellm_features():
    import litellm
    kw = {"model": "openai/ripcord", "api_base": url + "/v1", "api_key": "k"}

    def chat():
        r = litellm.completion(messages=hi, **kw)
        return r.choices[0].message.content == HELLO, {"text": r.choices[0].message.content}

    def stream():
        text, usage = "", 0
        for ch in litellm.completion(messages=hi, stream=True, stream_options={"include_usage": True}, **kw):
            if ch.choices and ch.choices[0].delta.content:
                text += ch.choices[0].delta.content
            u = getattr(ch, "usage", None)
            if u:
                usage = u.completion_tokens
        return text == HELLO and usage > 0, {"text": text, "usage": usage}

    def tools():
        chunks = list(litellm.completion(messages=ask, tools=[weather], stream=True, **kw))
        first = litellm.stream_chunk_builder(chunks, messages=ask)
        msg = first.choices[0].message
        call = msg.tool_calls[0]
        history = ask + [msg.model_dump(), {"role": "tool", "tool_call_id": call.id, "content": "-3C"}]
        second = litellm.completion(messages=history, tools=[weather], **kw)
        ok = call.function.name == "weather" and json.loads(call.function.arguments) == {"city": "Oslo"} \
            and second.choices[0].message.content == "It is sunny"
        return ok, {"args": call.function.arguments, "second": second.choices[0].message.content}

    def structured():
        r = litellm.completion(messages=hi, response_format={"type": "json_schema", "json_schema":
                               {"name": "place", "schema": schema, "strict": True}}, **kw)
        return json.loads(r.choices[0].message.content) == {"city": "Oslo"}, {"text": r.choices[0].message.content}

    def embeddings():
        r = litellm.embedding(model="openai/text-embedding-3-small", input=["alpha", "beta"],
                              api_base=url + "/v1", api_key="k")
        f = litellm.embedding(model="openai/text-embedding-3-small", input=["alpha", "beta"],
                              api_base=url + "/v1", api_key="k", encoding_format="float")
        a, b = r.data[0]["embedding"], f.data[0]["embedding"]
        return len(a) > 1 and a == b, {"default": a[:3], "float": b[:3]}

    def retries():
        try:
            litellm.completion(messages=hi, **kw)
            return False, {"error": "answered"}
        except Exception as e:  # litellm maps each 5xx to its own class (502 BadGatewayError, 503 ServiceUnavailableError, ...)
            status = getattr(e, "status_code", None)
            return isinstance(status, int) and 500 <= status < 600, {"error": type(e).__name__, "status": status}

    def fallback():
        r = litellm.completion(messages=hi, **kw)
        models = {r.model}
        for ch in litellm.completion(messages=hi, stream=True, **kw):
            models.add(ch.model)
        return models == {"gpt-4o-mini"}, {"models": sorted(map(str, models))}

    return locals()


def instructor_features():
    import instructor, openai
    c = instructor.from_openai(openai.OpenAI(base_url=url + "/v1", api_key="k"))

    def none():
        return None, {}

    def structured():
        r = c.chat.completions.create(model="ripcord", response_model=Place, messages=[{"role": "user", "content": "Where?"}])
        return r.city == "Oslo", {"object": r.model_dump()}

    def retries():
        try:
            c.chat.completions.create(model="ripcord", response_model=Place, messages=hi)
            return False, {"error": "answered"}
        except Exception as e:
            # instructor may wrap the SDK's error; the SDK's class must be in the chain.
            cause, depth = e, 0
            while cause is not None and not isinstance(cause, openai.InternalServerError) and depth < 10:
                cause = cause.__cause__ or cause.__context__ or getattr(cause, "last_exception", None)
                depth += 1
            return isinstance(cause, openai.InternalServerError), {"error": type(e).__name__}

    def fallback():
        obj, completion = c.chat.completions.create_with_completion(model="ripcord", response_model=Place, messages=hi)
        return obj.city == "Oslo" and completion.model == "gpt-4o-mini", {"model": completion.model}

    return {"chat": none, "stream": none, "tools": none, "structured": structured,
            "embeddings": none, "retries": retries, "fallback": fallback}


def llama_index_features():
    import openai
    from llama_index.llms.openai import OpenAI
    from llama_index.embeddings.openai import OpenAIEmbedding
    from llama_index.core.llms import ChatMessage
    from llama_index.core.tools import FunctionTool
    # llama-index looks its model up in its own table of OpenAI names: the route's alias gpt-4o.
    llm = OpenAI(model="gpt-4o", api_base=url + "/v1", api_key="k")
    msgs = [ChatMessage(role="user", content="Say hi")]

    def chat():
        r = llm.chat(msgs)
        return r.message.content == HELLO, {"text": r.message.content}

    def stream():
        text, usage = "", 0
        for ch in llm.stream_chat(msgs):
            text += ch.delta or ""
            u = getattr(ch.raw, "usage", None) if ch.raw is not None else None
            if u:
                usage = u.completion_tokens
        return text == HELLO and usage > 0, {"text": text, "usage": usage}

    def tools():
        def weather_fn(city: str) -> str:
            """Weather in a city"""
            return "-3C"
        tool = FunctionTool.from_defaults(fn=weather_fn, name="weather")
        history = [ChatMessage(role="user", content="Weather in Oslo?")]
        last = None
        for last in llm.stream_chat_with_tools([tool], chat_history=history):
            pass
        calls = llm.get_tool_calls_from_response(last, error_on_no_tool_call=True)
        history.append(last.message)
        history.append(ChatMessage(role="tool", content="-3C", additional_kwargs={"tool_call_id": calls[0].tool_id, "name": "weather"}))
        second = llm.chat_with_tools([tool], chat_history=history)
        ok = calls[0].tool_name == "weather" and calls[0].tool_kwargs == {"city": "Oslo"} and second.message.content == "It is sunny"
        return ok, {"kwargs": calls[0].tool_kwargs, "second": second.message.content}

    def structured():
        from llama_index.core.prompts import PromptTemplate
        r = llm.structured_predict(Place, PromptTemplate("Where?"))
        return r.city == "Oslo", {"object": r.model_dump()}

    def embeddings():
        e = OpenAIEmbedding(model="text-embedding-3-small", api_base=url + "/v1", api_key="k")
        v = e.get_text_embedding_batch(["alpha", "beta"])
        q = e.get_query_embedding("alpha")
        return len(v) == 2 and len(v[0]) > 1 and v[0] == q, {"head": v[0][:3]}

    def retries():
        try:
            llm.chat(msgs)
            return False, {"error": "answered"}
        except openai.InternalServerError as e:
            return True, {"error": type(e).__name__}

    def fallback():
        r = llm.chat(msgs)
        models = {r.raw.model}
        for ch in llm.stream_chat(msgs):
            if ch.raw is not None:
                models.add(ch.raw.model)
        return models == {"gpt-4o-mini"}, {"models": sorted(map(str, models))}

    return locals()


features = {
    "langchain-openai": langchain_openai_features,
    "langchain-anthropic": langchain_anthropic_features,
    "litellm": litellm_features,
    "instructor": instructor_features,
    "llama-index": llama_index_features,
}[client]()
print("RIPCORD-SUITE " + json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    feature = line.strip()
    try:
        ok, extra = features[feature]()
        out = {"ok": None if ok is None else bool(ok), **extra}
    except Exception:
        out = {"ok": False, "error": traceback.format_exc()[-800:]}
    # Marked, because libraries print to stdout too (litellm its help banners).
    print("RIPCORD-SUITE " + json.dumps(out, default=str), flush=True)
