# Runtime image of one Modelplane composition function. Build from the repository root:
#
#   docker build -f docs/manifests/function.Dockerfile \
#     --build-arg FUNCTION=compose-model-deployment -t <registry>/compose-model-deployment:v0.1.0 .
#
# The image installs exactly what uv.lock pins for that one function (its workspace
# dependencies modelplane-common and modelplane-schemas included, no dev tools) and starts the
# function's console script. Crossplane sets TLS_SERVER_CERTS_DIR on function pods, which the
# function CLI reads, and dials port 9443 (the default --address).
FROM python:3.11-slim AS build
ARG FUNCTION
RUN pip install --no-cache-dir uv
WORKDIR /src
COPY . .
RUN uv export --frozen --no-dev --no-editable --no-hashes --package "${FUNCTION}" -o /requirements.txt \
 && uv venv /venv --python /usr/local/bin/python3.11 \
 && uv pip install --python /venv/bin/python --no-cache -r /requirements.txt

FROM python:3.11-slim
ARG FUNCTION
COPY --from=build /venv /venv
ENV PATH=/venv/bin:$PATH \
    FUNCTION=${FUNCTION}
EXPOSE 9443
USER 65532:65532
ENTRYPOINT ["sh", "-c", "exec \"$FUNCTION\" \"$@\"", "--"]
