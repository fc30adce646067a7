"""Text a visitor, a link, a file or a model could hand the app: Markdown, HTML, bare URLs and e-mail
addresses (GitHub autolinks), math, Streamlit directives and bidirectional controls."""

HOSTILE_LINES = (
    "see http://evil.example/x and HTTPS://EVIL.EXAMPLE/Y now",
    "www.evil.example and WWW.evil.example here",
    "mail evil@evil.example or mailto:evil@evil.example",
    "[LNK](http://evil.example/a) ![IMG](http://evil.example/i.png) <http://evil.example/b> <b>HTM</b>",
    "*EMX* __EMY__ $MTH$ :red[DIR] :material/home: `code`",
    "a\u202eabc\u202c d \u2066x\u2069",
)
