"""`specir serve`: an OpenAI-compatible HTTP server over one warm StepEngine with continuous batching.

protocol.py parses and checks request bodies (OpenAI errors), chat_template.py turns messages into
ids, text_stream.py turns ids into text (stop strings), scheduler.py owns the engine (one thread),
metrics.py renders Prometheus text, responses.py shapes the JSON, app.py holds the routes and
server.py the socket, event loop and their lifetime.
"""
