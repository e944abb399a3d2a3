{
  description = "Modelplane: a fleet-level control plane for AI inference on Crossplane v2";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-25.05";
    flake-utils.url = "github:numtide/flake-utils";
  };

  outputs = { self, nixpkgs, flake-utils }:
    flake-utils.lib.eachDefaultSystem (system:
      let
        pkgs = import nixpkgs { inherit system; };
      in
      {
        # `nix develop` gives the same toolchain CI uses: Python 3.11, uv and ruff.
        # uv then builds the workspace virtualenv from uv.lock (`uv sync --frozen`).
        devShells.default = pkgs.mkShell {
          packages = [
            pkgs.python311
            pkgs.uv
            pkgs.ruff
            pkgs.git
          ];
          env = {
            UV_PYTHON = "${pkgs.python311}/bin/python3.11";
            UV_PYTHON_DOWNLOADS = "never";
          };
          shellHook = ''
            echo "modelplane dev shell: run 'uv sync --frozen' then 'uv run pytest'"
          '';
        };
      });
}
