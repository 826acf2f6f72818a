// YAML -> Config. Overrides ("train.epochs=3", "model.layers.1.units=64") are applied to the YAML
// tree before typing, so they get the same checks. Every error names file:line:column and the key,
// with a did-you-mean for misspelt keys and enum values. The effective config is emitted as YAML.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "spec/config.h"

namespace rnntrain {

// Reads and validates a config file. Throws ConfigError.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});
// The same from text; `filename` is used in messages and to resolve relative data paths.
Config parse_config(const std::string& yaml_text, const std::string& filename,
                    const std::vector<std::string>& overrides = {});
// The effective config, every key explicit, as YAML that parse_config reads back to an equal Config.
std::string emit_config(const Config& cfg);

// The metric a name means, as train.metrics spells it or its alias ("acc", "mean_absolute_error"),
// compared in lower case without underscores (so Keras' class names match too: "MeanAbsoluteError");
// MetricSpec::name is the config's spelling. std::nullopt when no metric is called so.
std::optional<MetricSpec> metric_named(const std::string& name);
// The metrics' config names, aliases left out, for messages.
std::vector<std::string> metric_names();

}  // namespace rnntrain
