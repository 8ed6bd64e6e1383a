#!/usr/bin/env bash
# Screenshots of the built docs site in headless Chromium (Debian's chromium package), for a
# person to look at, 1400 px wide: the front page, the getting-started and Spark guides,
# and the API pages of the client (connect's parameter table) and of JetStream. Usage:
#   bash tools/docs_shots.sh SITE_DIR OUT_DIR        (make docs-shots: site/ -> out/shots/)
# Not run in CI (no browser there). Pages are opened as file:// URLs: the site is built
# with use_directory_urls: false, so its links work without a web server.
set -euo pipefail
site=$(cd "$1" && pwd)
out=$2
mkdir -p "$out"
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "docs-shots: no Chromium found (Debian: apt-get install -y chromium)" >&2
    exit 1
fi
for page in index guides/getting-started guides/spark reference/client reference/jetstream; do
    name=$(echo "$page" | tr / -)
    "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --window-size=1400,2000 --virtual-time-budget=3000 \
        --screenshot="$out/$name.png" "file://$site/$page.html" 2>/dev/null
    echo "$out/$name.png"
done
