#!/bin/sh
# Make the free-threaded test venv: tools/make_ft_venv.sh VENV PYTHON (make test-ft).
#
# Installs the package (editable) and setup.cfg's dev extra (wheels preferred: a newer
# sdist may need a Rust toolchain, as hypothesis's does), except the packages in
# FT_OPTIONAL: those need native code with no free-threaded wheel on the registry
# (trustme -> cryptography, nkeys -> pynacl) and are tried one by one, from wheels only.
# Each that does not end up importable is written, with the reason, to VENV/ft-missing.txt;
# tests/conftest.py then leaves out the test files that import it and says so. The lint
# tools (FT_SKIP: mypy, ruff) are left out: no test runs them, and mypy's dependencies
# have no free-threaded wheel either (they build with Rust).
set -eu

venv=${1:?usage: tools/make_ft_venv.sh VENV PYTHON}
python=${2:?usage: tools/make_ft_venv.sh VENV PYTHON}
# module=requirement name (as setup.cfg's dev extra spells it)=the native package it needs
FT_OPTIONAL="trustme=trustme=cryptography nkeys=nkeys=pynacl"
FT_SKIP="mypy ruff"

rm -rf "$venv"
"$python" -m venv "$venv"
pip="$venv/bin/python -m pip --disable-pip-version-check"

required=$("$venv/bin/python" - "$FT_OPTIONAL $FT_SKIP" <<'EOF'
import configparser, re, sys
optional = {(word.split("=") + [word])[1] for word in sys.argv[1].split()}
config = configparser.ConfigParser()
config.read("setup.cfg")
for line in config["options.extras_require"]["dev"].split():
    if re.split(r"[<>=!\[;]", line)[0] not in optional:
        print(line)
EOF
)
# shellcheck disable=SC2086
# setuptools: a 3.12+ venv has none, and tests/docs/test_sdist.py builds the sdist with it.
$pip install --quiet --prefer-binary -e . setuptools $required

: > "$venv/ft-missing.txt"
for pair in $FT_OPTIONAL; do
    module=${pair%%=*}
    native=${pair##*=}
    name=${pair#*=}
    name=${name%=*}
    spec=$("$venv/bin/python" -c "
import configparser, re
config = configparser.ConfigParser()
config.read('setup.cfg')
print(next(line for line in config['options.extras_require']['dev'].split()
           if re.split(r'[<>=!\[;]', line)[0] == '$name'))")
    if $pip install --quiet --only-binary=:all: "$spec" >"$venv/ft-$name.log" 2>&1 \
            && "$venv/bin/python" -c "import $module" 2>>"$venv/ft-$name.log"; then
        echo "make_ft_venv: $spec installed"
    else
        reason=$(grep -E '^(ERROR|ModuleNotFoundError|ImportError)' "$venv/ft-$name.log" | tail -n 1)
        echo "$module: $spec did not install from wheels on this free-threaded Python (it needs $native, native code; pip: ${reason:-see $venv/ft-$name.log})" \
            | tee -a "$venv/ft-missing.txt"
    fi
done
