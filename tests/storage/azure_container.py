#!/usr/bin/env python3
"""Create a blob container on Azurite with a SharedKey-signed request (stdlib only).

usage: azure_container.py ENDPOINT ACCOUNT KEY CONTAINER
object_store cannot create containers, and the Azure CLI is not installed here.
"""
import base64, hashlib, hmac, sys, urllib.error, urllib.request
from email.utils import formatdate

endpoint, account, key, container = sys.argv[1:5]
date = formatdate(usegmt=True)
version = "2021-08-06"
# String to sign for PUT with no body: verb, 11 standard headers, x-ms headers, resource.
to_sign = "\n".join([
    # urllib always sends a Content-Type with a body, so it is set and signed explicitly.
    "PUT", "", "", "", "", "application/octet-stream", "", "", "", "", "", "",
    f"x-ms-date:{date}\nx-ms-version:{version}",
    f"/{account}/{account}/{container}\nrestype:container",
])
sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
req = urllib.request.Request(
    f"{endpoint}/{account}/{container}?restype=container", method="PUT", data=b"",
    headers={"x-ms-date": date, "x-ms-version": version,
             "Authorization": f"SharedKey {account}:{sig}", "Content-Length": "0",
             "Content-Type": "application/octet-stream"})
try:
    urllib.request.urlopen(req, timeout=10)
except urllib.error.HTTPError as e:
    if e.code != 409:  # 409: the container exists already
        sys.exit(f"creating Azure container {container} failed: HTTP {e.code} {e.read()[:300]!r}")
