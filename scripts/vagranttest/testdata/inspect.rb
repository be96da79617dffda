# Loads a Vagrantfile against a recording stand-in for Vagrant's configuration
# API and prints what it set as JSON. `vagrant validate --ignore-provider`
# skips the provider blocks, and validating them needs the providers
# installed; this shows what they ask for without either.
require "json"

class Recorder
  def initialize
    @data = {}
  end

  def to_h
    @data.transform_values { |v| v.is_a?(Recorder) ? v.to_h : v }
  end

  def vm
    @data["vm"] ||= Recorder.new
  end

  def provider(name)
    r = Recorder.new
    yield r if block_given?
    (@data["providers"] ||= {})[name.to_s] = r.to_h
  end

  def synced_folder(src, dst, opts = {})
    (@data["synced_folders"] ||= []) << { "src" => src, "dst" => dst }.merge(stringify(opts))
  end

  def provision(name, opts = {})
    (@data["provisioners"] ||= []) << { "name" => name }.merge(stringify(opts))
  end

  def customize(args)
    (@data["customize"] ||= []) << args.map(&:to_s)
  end

  def method_missing(name, *args)
    key = name.to_s
    raise NoMethodError, "the Vagrantfile calls #{key}, which this recorder does not know" unless key.end_with?("=") && args.size == 1

    @data[key.chomp("=")] = args[0]
  end

  def respond_to_missing?(name, include_private = false)
    name.to_s.end_with?("=") || super
  end

  private

  def stringify(opts)
    opts.to_h { |k, v| [k.to_s, v] }
  end
end

module Vagrant
  CONFIGS = []

  def self.require_version(*) end

  def self.configure(_version)
    c = Recorder.new
    yield c
    CONFIGS << c.to_h
  end
end

load ARGV.fetch(0)
puts JSON.generate(Vagrant::CONFIGS)
