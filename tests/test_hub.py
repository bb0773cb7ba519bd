"""``lf.hub`` against ``torch.hub``: weights served over HTTP on loopback, downloaded once, cached where torch
caches them (each library reads the other's cached file), hash-checked, never left half-written; local hubconf
entry points."""

import hashlib
import http.server
import os
import pickle
import threading

import numpy as np
import pytest
import torch

import lazyflow as lf
from lazyflow._core.errors import ArgumentError, CheckpointError, NotSupportedError
from lazyflow.hub import HashMismatchError, IncompleteDownloadError


class _Server:
    """Serves ``files`` (name -> bytes) on 127.0.0.1; counts requests; a name in ``short`` announces more bytes
    than it sends (a connection dropped mid-download)."""

    def __init__(self):
        self.files, self.short, self.hits = {}, set(), []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                name = self.path.lstrip("/")
                outer.hits.append(name)
                data = outer.files.get(name)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(data) + (1000 if name in outer.short else 0)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{name}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _weights(tmp_path):
    sd = {"fc.weight": torch.randn(3, 4), "fc.bias": torch.randn(3)}
    path = tmp_path / "src.pth"
    torch.save(sd, path)
    data = path.read_bytes()
    return sd, data, hashlib.sha256(data).hexdigest()


def test_weights_download_once_and_load_as_torchs(server, tmp_path):
    sd, data, digest = _weights(tmp_path)
    name = f"net-{digest[:8]}.pth"
    server.files[name] = data
    cache = tmp_path / "cache"
    got = lf.hub.load_state_dict_from_url(server.url(name), model_dir=str(cache), check_hash=True, progress=False)
    for k, v in sd.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy())
    again = lf.hub.load_state_dict_from_url(server.url(name), model_dir=str(cache), progress=False)
    assert server.hits == [name] and set(again) == set(sd)  # the second call read the cache
    theirs = torch.hub.load_state_dict_from_url(server.url(name), model_dir=str(cache), progress=False)
    assert server.hits == [name]  # torch read lazyflow's download too
    for k in sd:
        np.testing.assert_array_equal(theirs[k].numpy(), sd[k].numpy())
    model = lf.nn.Linear(4, 3)
    model.load_state_dict({k.removeprefix("fc."): v for k, v in got.items()})


def test_a_file_torch_downloaded_is_read_from_torchs_cache(server, tmp_path, monkeypatch):
    sd, data, _ = _weights(tmp_path)
    server.files["w.pth"] = data
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
    assert lf.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "th" / "hub")
    torch.hub.load_state_dict_from_url(server.url("w.pth"), progress=False)
    got = lf.hub.load_state_dict_from_url(server.url("w.pth"), progress=False)
    assert server.hits == ["w.pth"]
    np.testing.assert_array_equal(got["fc.bias"].numpy(), sd["fc.bias"].numpy())


def test_set_dir_and_the_default_location(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_HOME", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert lf.hub.get_dir() == torch.hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    monkeypatch.setattr(lf.hub, "_hub_dir", [])
    lf.hub.set_dir(tmp_path / "mine")
    assert lf.hub.get_dir() == str(tmp_path / "mine")


def test_a_wrong_hash_or_a_dropped_connection_leaves_no_file(server, tmp_path):
    _, data, digest = _weights(tmp_path)
    bad = "0" * 8 if not digest.startswith("0" * 8) else "1" * 8
    server.files[f"net-{bad}.pth"] = data
    cache = tmp_path / "cache"
    with pytest.raises(HashMismatchError, match="invalid hash value"):
        lf.hub.load_state_dict_from_url(server.url(f"net-{bad}.pth"), model_dir=str(cache), check_hash=True)
    server.files["cut.pth"] = data[: len(data) // 2]
    server.short.add("cut.pth")
    with pytest.raises(IncompleteDownloadError, match="stopped after"):
        lf.hub.load_state_dict_from_url(server.url("cut.pth"), model_dir=str(cache), progress=False)
    assert os.listdir(cache) == []  # neither a file at the target nor a leftover partial one
    with pytest.raises(ArgumentError, match="holding its hash"):
        lf.hub.load_state_dict_from_url(server.url("cut.pth"), model_dir=str(cache), check_hash=True)
    with pytest.raises(OSError):
        lf.hub.download_url_to_file(server.url("missing.pth"), str(tmp_path / "m.pth"), progress=False)
    assert not (tmp_path / "m.pth").exists()


class Gadget:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_weights_only_is_the_default_here(server, tmp_path):
    """torch's load_state_dict_from_url defaults to weights_only=False; lazyflow's to True: a file holding a
    pickled object that would run code is refused."""
    path = tmp_path / "evil.pth"
    torch.save({"w": torch.ones(1), "x": Gadget()}, path)
    server.files["evil.pth"] = path.read_bytes()
    with pytest.raises((CheckpointError, pickle.UnpicklingError)):
        lf.hub.load_state_dict_from_url(server.url("evil.pth"), model_dir=str(tmp_path / "c"), progress=False)


HUBCONF = '''
dependencies = ["numpy"]


def answer(scale=1):
    """The answer, scaled."""
    return 42 * scale


def _private():
    return 0
'''


def test_local_hubconf_entry_points_as_torchs(tmp_path):
    (tmp_path / "hubconf.py").write_text(HUBCONF)
    d = str(tmp_path)
    assert lf.hub.load(d, "answer", scale=2, source="local") == torch.hub.load(d, "answer", scale=2, source="local")
    assert lf.hub.list(d, source="local") == ["answer"]
    assert lf.hub.help(d, "answer", source="local") == "The answer, scaled."
    for lib in (lf, torch):
        with pytest.raises(RuntimeError, match="Cannot find callable missing in hubconf"):
            lib.hub.load(d, "missing", source="local")
    (tmp_path / "hubconf.py").write_text(HUBCONF.replace('["numpy"]', '["no_such_module_xyz"]'))
    for lib in (lf, torch):
        with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_xyz"):
            lib.hub.load(d, "answer", source="local")
    with pytest.raises(NotSupportedError, match="source='local'"):
        lf.hub.load("pytorch/vision", "resnet18")
    with pytest.raises(ArgumentError, match="Unknown source"):
        lf.hub.load(d, "answer", source="s3")
